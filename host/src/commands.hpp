// The tessera subcommands; each returns the process exit code and throws for errors main() maps.
#pragma once

#include <string>
#include <vector>

namespace tessera::cli {

int devices(const std::vector<std::string>& args);
int gemm(const std::vector<std::string>& args);
int validate(const std::vector<std::string>& args);
int plan(const std::vector<std::string>& args);

}  // namespace tessera::cli
