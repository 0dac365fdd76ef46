// Standalone driver for LLVMFuzzerTestOneInput targets when libFuzzer is not available (g++).
//
// Usage: TARGET [-runs=N] [-seed=S] [-max_len=L] [-max_total_time=SECONDS] PATH...
// Every PATH is a file or a directory of files (not recursive). Each file is passed to the
// target once, in sorted path order; then N inputs are derived from them by stacked random
// mutations (bit flips, byte edits, insertions of CSV tokens, deletions, duplications, splices
// with another file, truncation). The sequence of inputs depends only on the files, N, S and
// L. -max_total_time stops the mutation phase early when exceeded (0 = no limit). The target
// signals a failed property by aborting; the driver prints the input that is about to run only
// when FUZZ_VERBOSE is set. Exit status 0 after all inputs ran; 2 on a usage error.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : s_(seed) {}
  uint64_t Next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  size_t Below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(Next() % n); }

 private:
  uint64_t s_;
};

constexpr std::string_view kTokens[] = {
    ",",
    "\"",
    "\"\"",
    "\n",
    "\r\n",
    "\r",
    "|",
    "0",
    "1",
    "8",
    "16",
    "17",
    "1000",
    "1001",
    "-1",
    "+1",
    " 1",
    "1e3",
    "0x10",
    "68719476736",
    "65536000",
    "65536001",
    "1099511627776",
    "9223372036854775807",
    "9223372036854775808",
    "sn",
    "cpu_milli",
    "memory_mib",
    "gpu",
    "model",
    "name",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "creation_time",
    "deletion_time",
    "T4",
    "G2",
    "V100M16",
    "V100M32",
    "A100-80GB",
    "H200",
    "t4",
    "T4|G2",
    "||",
};

struct Options {
  uint64_t runs = 0;
  uint64_t seed = 1;
  size_t max_len = 4096;
  double max_total_time = 0;
  std::vector<std::string> paths;
};

bool ParseFlag(const char* arg, const char* name, std::string& value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  value = arg + n + 1;
  return true;
}

bool ParseOptions(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string v;
    try {
      if (ParseFlag(argv[i], "-runs", v)) {
        o.runs = std::stoull(v);
      } else if (ParseFlag(argv[i], "-seed", v)) {
        o.seed = std::stoull(v);
      } else if (ParseFlag(argv[i], "-max_len", v)) {
        o.max_len = std::stoull(v);
      } else if (ParseFlag(argv[i], "-max_total_time", v)) {
        o.max_total_time = std::stod(v);
      } else if (argv[i][0] == '-') {
        std::fprintf(stderr, "unknown option %s\n", argv[i]);
        return false;
      } else {
        o.paths.emplace_back(argv[i]);
      }
    } catch (const std::exception&) {
      std::fprintf(stderr, "bad value in %s\n", argv[i]);
      return false;
    }
  }
  return true;
}

std::vector<std::string> ListFiles(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      for (const auto& e : fs::directory_iterator(p, ec)) {
        if (e.is_regular_file(ec)) files.push_back(e.path().string());
      }
    } else if (fs::is_regular_file(p, ec)) {
      files.push_back(p);
    } else {
      std::fprintf(stderr, "skipping %s: not a file or directory\n", p.c_str());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void Mutate(std::string& s, const std::vector<std::string>& corpus, SplitMix64& rng) {
  const size_t edits = 1 + rng.Below(4);
  for (size_t e = 0; e < edits; ++e) {
    switch (rng.Below(8)) {
      case 0:
        if (!s.empty()) s[rng.Below(s.size())] ^= static_cast<char>(1u << rng.Below(8));
        break;
      case 1:
        if (!s.empty()) s[rng.Below(s.size())] = static_cast<char>(rng.Below(256));
        break;
      case 2:
        s.insert(rng.Below(s.size() + 1), 1, static_cast<char>(rng.Below(256)));
        break;
      case 3:
      case 4: {
        const std::string_view t = kTokens[rng.Below(std::size(kTokens))];
        s.insert(rng.Below(s.size() + 1), t);
        break;
      }
      case 5:
        if (!s.empty()) {
          const size_t at = rng.Below(s.size());
          s.erase(at, 1 + rng.Below(std::min<size_t>(s.size() - at, 16)));
        }
        break;
      case 6:
        if (!s.empty()) {
          const size_t at = rng.Below(s.size());
          const size_t len = 1 + rng.Below(std::min<size_t>(s.size() - at, 64));
          const std::string piece = s.substr(at, len);
          s.insert(rng.Below(s.size() + 1), piece);
        }
        break;
      default: {
        const std::string& other = corpus[rng.Below(corpus.size())];
        if (!other.empty()) {
          const size_t at = rng.Below(other.size());
          s = s.substr(0, rng.Below(s.size() + 1)) + other.substr(at);
        } else {
          s.resize(rng.Below(s.size() + 1));
        }
        break;
      }
    }
  }
}

void Run(const std::string& input) {
  if (std::getenv("FUZZ_VERBOSE") != nullptr) {
    std::fprintf(stderr, "input (%zu bytes): ", input.size());
    std::fwrite(input.data(), 1, input.size(), stderr);
    std::fputc('\n', stderr);
  }
  // A private copy, so reads past the end are caught by sanitizers when enabled.
  std::vector<uint8_t> buf(input.begin(), input.end());
  LLVMFuzzerTestOneInput(buf.data(), buf.size());
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseOptions(argc, argv, o) || o.paths.empty()) {
    std::fprintf(stderr,
                 "usage: %s [-runs=N] [-seed=S] [-max_len=L] [-max_total_time=SECONDS] PATH...\n",
                 argv[0]);
    return 2;
  }
  const std::vector<std::string> files = ListFiles(o.paths);
  std::vector<std::string> corpus;
  for (const auto& f : files) {
    corpus.push_back(ReadAll(f));
    Run(corpus.back());
  }
  if (corpus.empty()) corpus.emplace_back();
  const auto start = std::chrono::steady_clock::now();
  SplitMix64 rng(o.seed);
  uint64_t done = 0;
  for (; done < o.runs; ++done) {
    if (o.max_total_time > 0 && (done & 255) == 0) {
      const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
      if (elapsed.count() > o.max_total_time) break;
    }
    std::string input = corpus[rng.Below(corpus.size())];
    Mutate(input, corpus, rng);
    if (input.size() > o.max_len) input.resize(o.max_len);
    Run(input);
  }
  std::printf("%s: %zu corpus files, %llu mutated inputs, no failure\n", argv[0], files.size(),
              static_cast<unsigned long long>(done));
  return 0;
}
