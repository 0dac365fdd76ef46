// Minimal strict CSV reader (RFC 4180 subset: comma separator, optional double quotes,
// "" escapes inside quotes, LF or CRLF line ends). Every field knows its line and column so
// callers can report errors as FILE:LINE:COL. Pure; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tessera {

struct CsvField {
  std::string text;
  int line = 0;    // 1-based
  int column = 0;  // 1-based, of the field's first character
};

struct CsvRow {
  std::vector<CsvField> fields;
  int line = 0;
};

// Splits `content` into rows. Blank lines are kept out; a quote opened and never closed, or
// characters after a closing quote, is an error naming the position.
Result<std::vector<CsvRow>> ParseCsv(std::string_view content, const std::string& source);

// Largest input file any reader accepts: 256 MiB.
inline constexpr int64_t kMaxInputFileBytes = int64_t{256} << 20;

// The whole content of the regular file at `path`, read without following the file past
// kMaxInputFileBytes (a file that grows while it is read is refused, not truncated).
// IoError "cannot open 'PATH': REASON" when it cannot be opened; InvalidArgument
// "PATH: not a regular file" for a directory, device, FIFO or socket (opened without blocking,
// so a FIFO with no writer does not hang), and "PATH: larger than the 256 MiB input limit"
// when it exceeds kMaxInputFileBytes.
Result<std::string> ReadFileToString(const std::string& path);

// `content` without a leading UTF-8 byte order mark (EF BB BF); other content unchanged.
// Readers apply it before parsing, so a file saved with a BOM reads like one without and
// LINE:COL positions count from the first character after the mark. ParseCsv itself keeps the
// bytes it is given.
std::string_view SkipUtf8Bom(std::string_view content);

std::string Where(const std::string& source, int line, int column);

// InvalidArgument "SOURCE:LINE:COL: column 'COLUMN': WHAT" for field f.
Status CsvFieldError(const std::string& source, const CsvField& f, const std::string& column,
                     const std::string& what);
// A decimal integer field in [min, max]. Errors name the field: empty, not an integer, out of
// range, outside [min, max].
Result<int64_t> ParseCsvInt(const std::string& source, const CsvField& f, const std::string& column,
                            int64_t min, int64_t max);
// A finite decimal number field: digits with an optional fraction and exponent, an optional
// leading '-' (and '+' when allow_plus); no spaces, inf or nan. Errors name the field: empty,
// not a number, out of range.
Result<double> ParseCsvDecimal(const std::string& source, const CsvField& f,
                               const std::string& column, bool allow_plus);

}  // namespace tessera
