// Fuzz target for ParseCsv (src/sim/csv.h).
//
// Properties: ParseCsv never crashes, and it agrees exactly with a small reference reader
// written from the contract in csv.h: comma separator; a field that starts with a double quote
// is quoted, runs to the next unpaired quote ("" is a literal quote) and may span lines; after
// the closing quote only a comma, LF, CRLF or the end of input may follow; an unquoted field
// runs to the next comma or line end; a CR directly before LF belongs to the line end, any
// other CR is data; lines with nothing on them yield no row. Both must accept the same inputs
// and, on success, return the same rows with the same texts, lines and columns. Errors must
// name the source.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "sim/csv.h"

#include "fuzz/fuzz_util.h"

namespace {

const std::string kSource = "fuzz.csv";

using tessera::fuzz::Fail;

struct RefRow {
  std::vector<tessera::CsvField> fields;
  int line = 0;
};

// Returns false on a malformed input.
bool ReferenceParse(std::string_view s, std::vector<RefRow>& rows) {
  size_t i = 0;
  int line = 1, col = 1;
  const auto line_end_at = [&](size_t k) {
    return k < s.size() && (s[k] == '\n' || (s[k] == '\r' && k + 1 < s.size() && s[k + 1] == '\n'));
  };
  while (i < s.size()) {
    RefRow row;
    row.line = line;
    bool quoted_any = false;
    while (true) {
      tessera::CsvField f;
      f.line = line;
      f.column = col;
      if (i < s.size() && s[i] == '"') {
        quoted_any = true;
        ++i, ++col;
        bool closed = false;
        while (i < s.size()) {
          if (s[i] == '"') {
            if (i + 1 < s.size() && s[i + 1] == '"') {
              f.text += '"';
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
          f.text += s[i++];
        }
        if (!closed) return false;
        if (i < s.size() && s[i] != ',' && !line_end_at(i)) return false;
      } else {
        while (i < s.size() && s[i] != ',' && !line_end_at(i)) {
          f.text += s[i++];
          ++col;
        }
      }
      row.fields.push_back(std::move(f));
      if (i < s.size() && s[i] == ',') {
        ++i, ++col;
        continue;
      }
      break;
    }
    if (i < s.size()) {
      i += s[i] == '\r' ? 2 : 1;
      ++line;
      col = 1;
    }
    const bool blank = !quoted_any && row.fields.size() == 1 && row.fields[0].text.empty();
    if (!blank) rows.push_back(std::move(row));
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  auto parsed = tessera::ParseCsv(input, kSource);
  std::vector<RefRow> expect;
  const bool ref_ok = ReferenceParse(input, expect);
  if (!parsed.ok()) {
    if (ref_ok) Fail("ParseCsv rejected an input the contract accepts", input);
    if (parsed.status().message().rfind(kSource + ":", 0) != 0)
      Fail("error message does not start with SOURCE:LINE:COL", input);
    return 0;
  }
  if (!ref_ok) Fail("ParseCsv accepted an input the contract rejects", input);
  const auto& rows = *parsed;
  if (rows.size() != expect.size()) Fail("row count differs from the reference", input);
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].line != expect[r].line) Fail("row line differs from the reference", input);
    if (rows[r].fields.size() != expect[r].fields.size())
      Fail("field count differs from the reference", input);
    for (size_t k = 0; k < rows[r].fields.size(); ++k) {
      const auto& a = rows[r].fields[k];
      const auto& b = expect[r].fields[k];
      if (a.text != b.text) Fail("field text differs from the reference", input);
      if (a.line != b.line || a.column != b.column)
        Fail("field position differs from the reference", input);
    }
  }
  return 0;
}
