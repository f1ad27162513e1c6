// oxicuda-doctor's report: sections of fields, written as text for people
// or as JSON for programs. A section is built once and printed either way,
// so a new section (NVRTC, the compile cache, ...) is one function that
// fills a Section.
#pragma once

#include <cstdio>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace oxicuda_examples {

// A scalar JSON value: null, a boolean, an integer or a string.
using Scalar = std::variant<std::nullptr_t, bool, long long, std::string>;

struct Field;

// An object of the JSON form; in the text form, a title line and its
// labelled fields, indented.
struct Section {
  std::string title;  // the text form's heading line; empty: none
  std::vector<Field> fields;

  // A member printed in both forms ("label: text" in the text form; the
  // value's own spelling when text is empty) or, with an empty label, in
  // the JSON form only.
  Section& add(std::string key, std::string label, Scalar value, std::string text = {});
  // A nested object, or an array of objects.
  Section& add(std::string key, Section object);
  Section& add(std::string key, std::vector<Section> array);
};

struct Field {
  std::string key;    // the JSON member's name
  std::string label;  // the text form prints "label: text"; empty: JSON only
  Scalar value;
  std::string text;
  std::vector<Section> nested;  // an object (one section) or an array
  bool is_array = false;
};

inline Section& Section::add(std::string key, std::string label, Scalar value, std::string text) {
  fields.push_back({std::move(key), std::move(label), std::move(value), std::move(text), {}, false});
  return *this;
}
inline Section& Section::add(std::string key, Section object) {
  fields.push_back({std::move(key), {}, nullptr, {}, {std::move(object)}, false});
  return *this;
}
inline Section& Section::add(std::string key, std::vector<Section> array) {
  fields.push_back({std::move(key), {}, nullptr, {}, std::move(array), true});
  return *this;
}

namespace detail {

inline void append_json_string(std::string& out, const std::string& s) {
  static constexpr char hex[] = "0123456789abcdef";
  out += '"';
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (u < 0x20) {
          out += "\\u00";
          out += hex[u >> 4];
          out += hex[u & 0xF];
        } else {
          out += c;  // UTF-8 passes through unchanged
        }
    }
  }
  out += '"';
}

inline void append_json(std::string& out, const Section& section, int depth);

inline void append_json(std::string& out, const Field& f, int depth) {
  if (!f.is_array && !f.nested.empty()) return append_json(out, f.nested.front(), depth);
  if (f.is_array) {
    if (f.nested.empty()) {
      out += "[]";
      return;
    }
    const std::string indent(static_cast<std::size_t>(2 * depth), ' ');
    out += "[\n";
    for (std::size_t i = 0; i < f.nested.size(); ++i) {
      out += indent + "  ";
      append_json(out, f.nested[i], depth + 1);
      out += i + 1 < f.nested.size() ? ",\n" : "\n";
    }
    out += indent + "]";
  } else if (std::holds_alternative<std::nullptr_t>(f.value)) {
    out += "null";
  } else if (const bool* b = std::get_if<bool>(&f.value)) {
    out += *b ? "true" : "false";
  } else if (const long long* n = std::get_if<long long>(&f.value)) {
    out += std::to_string(*n);
  } else {
    append_json_string(out, std::get<std::string>(f.value));
  }
}

inline void append_json(std::string& out, const Section& section, int depth) {
  const std::string indent(static_cast<std::size_t>(2 * depth), ' ');
  out += "{\n";
  for (std::size_t i = 0; i < section.fields.size(); ++i) {
    out += indent + "  ";
    append_json_string(out, section.fields[i].key);
    out += ": ";
    append_json(out, section.fields[i], depth + 1);
    out += i + 1 < section.fields.size() ? ",\n" : "\n";
  }
  out += indent + "}";
}

inline std::string text_of(const Scalar& value) {
  if (std::holds_alternative<std::nullptr_t>(value)) return "unknown";
  if (const bool* b = std::get_if<bool>(&value)) return *b ? "yes" : "no";
  if (const long long* n = std::get_if<long long>(&value)) return std::to_string(*n);
  return std::get<std::string>(value);
}

inline void append_text(std::string& out, const Section& section, int depth) {
  const std::string indent(static_cast<std::size_t>(2 * depth), ' ');
  if (!section.title.empty()) out += indent + section.title + "\n";
  const int inner = section.title.empty() ? depth : depth + 1;
  const std::string field_indent(static_cast<std::size_t>(2 * inner), ' ');
  for (const Field& f : section.fields) {
    if (f.is_array || !f.nested.empty()) {
      for (const Section& item : f.nested) append_text(out, item, inner);
    } else if (!f.label.empty()) {
      out += field_indent + f.label + ": " + (f.text.empty() ? text_of(f.value) : f.text) + "\n";
    }
  }
}

}  // namespace detail

// The report as one JSON object: {"<section key>": {...}, ...}.
inline std::string to_json(const Section& report) {
  std::string out;
  detail::append_json(out, report, 0);
  return out + "\n";
}

// The report as text: each section's title, then its labelled fields, indented.
inline std::string to_text(const Section& report) {
  std::string out;
  detail::append_text(out, report, 0);
  return out;
}

}  // namespace oxicuda_examples
