// Fuzzes device spec strings (DeviceSpec::parse, driver/src/device_spec.cpp) and the options the
// simulated backends read from them (SimOptions::parse, driver/src/options.cpp), fault specs
// included. Bad specs must be UsageError; a spec that parses prints back to the same spec.
#include <cstdint>
#include <string>

#include "fuzz_util.hpp"
#include "options.hpp"
#include "tessera/driver/device.hpp"

using namespace tessera;
using namespace tessera::driver;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  DeviceSpec spec;
  try {
    spec = DeviceSpec::parse(text);
  } catch (const UsageError&) {
    return 0;
  }
  const std::string printed = spec.str();
  try {
    const DeviceSpec again = DeviceSpec::parse(printed);
    if (again.str() != printed || again.kind != spec.kind || again.index != spec.index || again.path != spec.path ||
        again.options != spec.options)
      fuzz::broken("a printed device spec does not parse back to the same spec");
  } catch (const UsageError&) {
    fuzz::broken("a printed device spec does not parse");
  }
  try {
    (void)SimOptions::parse(spec, {"slverr", "trace", "scoreboard"});
  } catch (const UsageError&) {
  }
  return 0;
}
