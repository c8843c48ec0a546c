#include <charconv>

#include <fmt/format.h>

#include "tessera/driver/device.hpp"

namespace tessera::driver {

DeviceSpec DeviceSpec::parse(const std::string& text) {
  DeviceSpec s;
  std::string head = text, query;
  if (const auto q = text.find('?'); q != std::string::npos) {
    head = text.substr(0, q);
    query = text.substr(q + 1);
  }
  std::string rest;
  if (const auto c = head.find(':'); c != std::string::npos) {
    s.kind = head.substr(0, c);
    rest = head.substr(c + 1);
  } else {
    s.kind = head;
  }
  if (s.kind != "model" && s.kind != "rtl" && s.kind != "xdma")
    throw UsageError(fmt::format("unknown device '{}' (devices: model[:i][?opts], rtl[:i][?opts], xdma:/dev/xdmaN)", text));
  if (s.kind == "xdma") {
    s.path = rest.empty() ? "/dev/xdma0" : rest;
  } else if (!rest.empty()) {
    const auto r = std::from_chars(rest.data(), rest.data() + rest.size(), s.index);
    if (r.ec != std::errc() || r.ptr != rest.data() + rest.size() || s.index < 0)
      throw UsageError(fmt::format("device '{}': '{}' is not a device index", text, rest));
  }
  size_t pos = 0;
  while (pos < query.size()) {
    const size_t amp = std::min(query.find('&', pos), query.size());
    const std::string kv = query.substr(pos, amp - pos);
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      throw UsageError(fmt::format("device '{}': option '{}' is not key=value", text, kv));
    s.options[kv.substr(0, eq)] = kv.substr(eq + 1);
    pos = amp + 1;
  }
  return s;
}

std::string DeviceSpec::str() const {
  std::string out = kind == "xdma" ? kind + ":" + path : fmt::format("{}:{}", kind, index);
  char sep = '?';
  for (const auto& [k, v] : options) {
    out += fmt::format("{}{}={}", sep, k, v);
    sep = '&';
  }
  return out;
}

std::string DeviceSpec::option(const std::string& key, const std::string& fallback) const {
  const auto it = options.find(key);
  return it == options.end() ? fallback : it->second;
}

std::string DeviceSpec::preset() const {
  return option("preset", option("precision", "int8") == "bf16" ? "default-bf16" : "default");
}

}  // namespace tessera::driver
