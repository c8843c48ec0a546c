// Fuzzes the safetensors reader (host/io/safetensors.cpp): the 8-byte header size, the header
// JSON and the data section. A bad file must be a ModelError; every tensor of a file that opens
// must lie inside the file and convert to float32 (or be refused with a ModelError).
#include <cstdint>
#include <cstring>

#include "fuzz_util.hpp"
#include "tessera/io/safetensors.hpp"

using namespace tessera;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fuzz::ScratchDir dir("safetensors");
  const auto path = dir.write("model.safetensors", {data, size});
  try {
    const SafetensorsFile file = SafetensorsFile::open(path);
    for (const auto& [name, t] : file.tensors()) {
      const auto raw = file.raw(name);
      if (raw.size() != t.end - t.begin || raw.size() != t.elements() * dtype_size(t.dtype))
        fuzz::broken("a tensor's bytes disagree with its data_offsets, shape and dtype");
      // Touch every byte, so that the address sanitizer sees a span that runs out of the file.
      uint8_t x = 0;
      for (uint8_t b : raw) x ^= b;
      volatile uint8_t sink = x;
      (void)sink;
      try {
        const auto values = file.load_f32(name, t.shape);
        if (values.size() != t.elements()) fuzz::broken("load_f32 returned the wrong number of values");
      } catch (const ModelError&) {
        // a dtype that does not convert to float32
      }
    }
    for (const auto& [key, value] : file.metadata()) (void)value.size();
  } catch (const ModelError&) {
    // bad input, named: what the CLI reports with exit 2
  }
  return 0;
}
