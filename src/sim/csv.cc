#include "sim/csv.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>

#include "core/text.h"

namespace tessera {

std::string Where(const std::string& source, int line, int column) {
  return source + ":" + std::to_string(line) + ":" + std::to_string(column);
}

Result<std::vector<CsvRow>> ParseCsv(std::string_view s, const std::string& source) {
  std::vector<CsvRow> rows;
  CsvRow row;
  CsvField field;
  int line = 1, col = 1;
  size_t i = 0;
  bool row_has_content = false;
  auto start_field = [&] {
    field = CsvField{};
    field.line = line;
    field.column = col;
  };
  start_field();
  row.line = line;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '"' && field.text.empty() && col == field.column) {
      // Quoted field.
      const int qline = line, qcol = col;
      ++i, ++col;
      bool closed = false;
      while (i < s.size()) {
        if (s[i] == '"') {
          if (i + 1 < s.size() && s[i + 1] == '"') {
            field.text += '"';
            i += 2, col += 2;
            continue;
          }
          ++i, ++col;
          closed = true;
          break;
        }
        if (s[i] == '\n') {
          ++line;
          col = 1;
        } else {
          ++col;
        }
        field.text += s[i++];
      }
      if (!closed) return InvalidArgument(Where(source, qline, qcol) + ": unterminated quote");
      const bool crlf = i + 1 < s.size() && s[i] == '\r' && s[i + 1] == '\n';
      if (i < s.size() && s[i] != ',' && s[i] != '\n' && !crlf)
        return InvalidArgument(Where(source, line, col) + ": unexpected character after quote");
      row_has_content = true;
      continue;
    }
    if (c == ',') {
      row.fields.push_back(std::move(field));
      ++i, ++col;
      start_field();
      row_has_content = true;
      continue;
    }
    if (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') {
      ++i;
      continue;
    }
    if (c == '\n') {
      if (row_has_content || !field.text.empty()) {
        row.fields.push_back(std::move(field));
        rows.push_back(std::move(row));
      }
      row = CsvRow{};
      ++i, ++line, col = 1;
      row.line = line;
      start_field();
      row_has_content = false;
      continue;
    }
    field.text += c;
    row_has_content = true;
    ++i, ++col;
  }
  if (row_has_content || !field.text.empty()) {
    row.fields.push_back(std::move(field));
    rows.push_back(std::move(row));
  }
  return rows;
}

namespace {

std::string TooLarge(const std::string& path) {
  return path + ": larger than the " + std::to_string(kMaxInputFileBytes >> 20) +
         " MiB input limit";
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

Result<std::string> ReadFileToString(const std::string& path) {
  const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd.get() < 0) return IoError("cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return IoError("cannot read '" + path + "': " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return InvalidArgument(path + ": not a regular file");
  if (st.st_size > kMaxInputFileBytes) return InvalidArgument(TooLarge(path));
  // The announced size first, then whatever follows in chunks: a file that grew since fstat
  // is read up to one byte past the limit and no further.
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t used = 0;
  char chunk[1 << 16];
  while (true) {
    const bool direct = used < out.size();
    char* dst = direct ? out.data() + used : chunk;
    const size_t room =
        direct ? out.size() - used
               : std::min(sizeof chunk, static_cast<size_t>(kMaxInputFileBytes) + 1 - used);
    const ssize_t n = ::read(fd.get(), dst, room);
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError("error reading '" + path + "': " + std::strerror(errno));
    }
    if (n == 0) break;
    if (!direct) out.append(chunk, static_cast<size_t>(n));
    used += static_cast<size_t>(n);
    if (static_cast<int64_t>(used) > kMaxInputFileBytes) return InvalidArgument(TooLarge(path));
  }
  out.resize(used);
  return out;
}

std::string_view SkipUtf8Bom(std::string_view content) {
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  if (content.substr(0, kBom.size()) == kBom) content.remove_prefix(kBom.size());
  return content;
}

Status CsvFieldError(const std::string& source, const CsvField& f, const std::string& column,
                     const std::string& what) {
  return InvalidArgument(Where(source, f.line, f.column) + ": column '" + column + "': " + what);
}

Result<int64_t> ParseCsvInt(const std::string& source, const CsvField& f, const std::string& column,
                            int64_t min, int64_t max) {
  if (f.text.empty()) return CsvFieldError(source, f, column, "empty value, expected an integer");
  int64_t v = 0;
  const char* b = f.text.data();
  const char* e = b + f.text.size();
  auto [p, ec] = std::from_chars(b, e, v);
  if (ec == std::errc::result_out_of_range)
    return CsvFieldError(source, f, column, "'" + f.text + "' is out of range");
  if (ec != std::errc() || p != e)
    return CsvFieldError(source, f, column, "'" + f.text + "' is not an integer");
  if (v < min || v > max)
    return CsvFieldError(source, f, column,
                         std::to_string(v) + " outside the allowed range " + std::to_string(min) +
                             ".." + std::to_string(max));
  return v;
}

Result<double> ParseCsvDecimal(const std::string& source, const CsvField& f,
                               const std::string& column, bool allow_plus) {
  const std::string& t = f.text;
  if (t.empty()) return CsvFieldError(source, f, column, "empty value, expected a number");
  if (!PlainDecimal(t, allow_plus))
    return CsvFieldError(source, f, column, "'" + t + "' is not a number");
  double v = 0;
  const char* b = t.data() + (t[0] == '+' ? 1 : 0);
  auto [p, ec] = std::from_chars(b, t.data() + t.size(), v);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && !std::isfinite(v)))
    return CsvFieldError(source, f, column, "'" + t + "' is out of range");
  if (ec != std::errc() || p != t.data() + t.size())
    return CsvFieldError(source, f, column, "'" + t + "' is not a number");
  return v;
}

}  // namespace tessera
