// Minimal strict CSV reader (RFC 4180 subset: comma separator, optional double quotes,
// "" escapes inside quotes, LF or CRLF line ends). Every field knows its line and column so
// callers can report errors as FILE:LINE:COL. Pure; thread-compatible.
#pragma once

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

Result<std::string> ReadFileToString(const std::string& path);

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
