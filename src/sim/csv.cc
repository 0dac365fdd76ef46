#include "sim/csv.h"

#include <fstream>
#include <sstream>

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

Result<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError("cannot open '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return IoError("error reading '" + path + "'");
  return ss.str();
}

}  // namespace tessera
