// Argument helpers shared by the tessera subcommands. Pure functions, thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace tessera {

// "42-51", "1,2,3" or a mix; each seed a decimal integer, ranges ascending and at most 10,001
// long. InvalidArgument naming the list otherwise (also for an empty list).
Result<std::vector<uint64_t>> ParseSeedList(const std::string& text);
// Comma-separated items; empty items are dropped.
std::vector<std::string> SplitComma(const std::string& text);
// Prints "tessera: <message>" to stderr and returns the exit code 1.
int Fail(const Status& st);

}  // namespace tessera
