#include "megart/json.h"

#include "megart/error.h"
#include "megart/number_text.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace megart {

const JsonValue *JsonValue::get(std::string_view key) const {
  for (const auto &[k, v] : object)
    if (k == key)
      return &v;
  return nullptr;
}

const char *JsonValue::kind_name(Kind kind) {
  switch (kind) {
  case Kind::Null: return "null";
  case Kind::Bool: return "boolean";
  case Kind::Integer: return "integer";
  case Kind::Number: return "number";
  case Kind::String: return "string";
  case Kind::Array: return "array";
  case Kind::Object: return "object";
  }
  return "?";
}

std::string JsonValue::brief() const {
  std::string s;
  switch (kind) {
  case Kind::Null: s = "null"; break;
  case Kind::Bool: s = boolean ? "true" : "false"; break;
  case Kind::Integer: s = std::to_string(integer); break;
  case Kind::Number: {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", number);
    s = wide_digits.empty() ? std::string(buf) : wide_digits;
    break;
  }
  case Kind::String: s = json_quote(string); break;
  case Kind::Array:
    s = "[";
    for (size_t i = 0; i < array.size(); ++i)
      s += (i ? "," : "") + array[i].brief();
    s += "]";
    break;
  case Kind::Object:
    s = "{";
    for (size_t i = 0; i < object.size(); ++i)
      s += (i ? "," : "") + json_quote(object[i].first) + ":" + object[i].second.brief();
    s += "}";
    break;
  }
  if (s.size() > 80)
    s = s.substr(0, 77) + "...";
  return s;
}

namespace {

class Parser {
public:
  Parser(std::string_view text, const std::string &what, bool wide_integers)
      : text_(text), what_(what), wide_integers_(wide_integers) {}

  JsonValue document() {
    JsonValue v = value(0);
    skip_space();
    if (pos_ != text_.size())
      fail("unexpected text after the end of the JSON value");
    return v;
  }

private:
  // Deep nesting only comes from corrupt or hostile files; cap it to keep the stack safe.
  static constexpr int kMaxDepth = 64;

  std::string_view text_;
  const std::string &what_;
  bool wide_integers_; // an integer past 64 bits is read as a double rather than refused
  size_t pos_ = 0;

  [[noreturn]] void fail(const std::string &why) const {
    std::string near(text_.substr(pos_, 20));
    for (char &c : near)
      if (static_cast<unsigned char>(c) < 0x20)
        c = ' ';
    throw Error(what_ + ": invalid JSON at byte " + std::to_string(pos_) + ": " + why +
                (near.empty() ? " (at end of text)" : " (near '" + near + "')"));
  }

  void skip_space() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }

  bool consume(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void expect(char c, const char *context) {
    if (!consume(c))
      fail(std::string("expected '") + c + "' " + context);
  }

  bool literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) == word) {
      pos_ += word.size();
      return true;
    }
    return false;
  }

  JsonValue value(int depth) {
    if (depth > kMaxDepth)
      fail("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    skip_space();
    if (pos_ >= text_.size())
      fail("expected a value");
    JsonValue v;
    char c = text_[pos_];
    if (c == '{') {
      ++pos_;
      v.kind = JsonValue::Kind::Object;
      if (consume('}'))
        return v;
      do {
        skip_space();
        if (pos_ >= text_.size() || text_[pos_] != '"')
          fail("expected a string key in object");
        size_t key_pos = pos_;
        std::string key = string_literal();
        if (v.get(key)) {
          pos_ = key_pos;
          fail("duplicate key " + json_quote(key));
        }
        expect(':', "after object key");
        v.object.emplace_back(std::move(key), value(depth + 1));
      } while (consume(','));
      expect('}', "or ',' in object");
    } else if (c == '[') {
      ++pos_;
      v.kind = JsonValue::Kind::Array;
      if (consume(']'))
        return v;
      do {
        v.array.push_back(value(depth + 1));
      } while (consume(','));
      expect(']', "or ',' in array");
    } else if (c == '"') {
      v.kind = JsonValue::Kind::String;
      v.string = string_literal();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      number(v);
    } else if (literal("true")) {
      v.kind = JsonValue::Kind::Bool;
      v.boolean = true;
    } else if (literal("false")) {
      v.kind = JsonValue::Kind::Bool;
    } else if (literal("null")) {
      v.kind = JsonValue::Kind::Null;
    } else {
      fail("expected a value");
    }
    return v;
  }

  void number(JsonValue &v) {
    size_t start = pos_;
    bool integral = true;
    if (text_[pos_] == '-')
      ++pos_;
    auto digits = [&] {
      size_t d = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9')
        ++pos_;
      return pos_ - d;
    };
    size_t int_start = pos_;
    size_t n = digits();
    if (n == 0 || (n > 1 && text_[int_start] == '0')) {
      pos_ = start;
      fail("malformed number");
    }
    if (pos_ < text_.size() && text_[pos_] == '.') {
      integral = false;
      ++pos_;
      if (digits() == 0)
        fail("malformed number: no digits after '.'");
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      integral = false;
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-'))
        ++pos_;
      if (digits() == 0)
        fail("malformed number: no digits in exponent");
    }
    std::string token(text_.substr(start, pos_ - start));
    if (integral) {
      errno = 0;
      long long x = std::strtoll(token.c_str(), nullptr, 10);
      if (errno == ERANGE && wide_integers_) { // e.g. transformers' model_max_length 1e30
        v.kind = JsonValue::Kind::Number;
        v.number = std::strtod(token.c_str(), nullptr);
        v.wide_digits = token;
        return;
      }
      if (errno == ERANGE) {
        pos_ = start;
        fail("integer " + token + " does not fit in 64 bits");
      }
      v.kind = JsonValue::Kind::Integer;
      v.integer = x;
      v.number = static_cast<double>(x);
    } else {
      v.kind = JsonValue::Kind::Number;
      v.number = std::strtod(token.c_str(), nullptr);
    }
  }

  unsigned hex4() {
    if (pos_ + 4 > text_.size())
      fail("truncated \\u escape");
    unsigned u = 0;
    for (int i = 0; i < 4; ++i) {
      char h = text_[pos_++];
      u <<= 4;
      if (h >= '0' && h <= '9')
        u |= h - '0';
      else if (h >= 'a' && h <= 'f')
        u |= h - 'a' + 10;
      else if (h >= 'A' && h <= 'F')
        u |= h - 'A' + 10;
      else
        fail("bad hex digit in \\u escape");
    }
    return u;
  }

  static void append_utf8(std::string &out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string string_literal() {
    ++pos_; // opening quote
    std::string out;
    while (true) {
      if (pos_ >= text_.size())
        fail("unterminated string");
      char c = text_[pos_++];
      if (c == '"')
        return out;
      if (static_cast<unsigned char>(c) < 0x20) {
        --pos_;
        fail("control character inside string (must be escaped)");
      }
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size())
        fail("unterminated escape");
      char e = text_[pos_++];
      switch (e) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        unsigned cp = hex4();
        if (cp >= 0xD800 && cp < 0xDC00) {
          // A high surrogate must be followed by a low one; together they name one code point.
          if (text_.substr(pos_, 2) != "\\u")
            fail("high surrogate \\u escape without a following low surrogate");
          pos_ += 2;
          unsigned lo = hex4();
          if (lo < 0xDC00 || lo >= 0xE000)
            fail("high surrogate \\u escape followed by a non-low-surrogate");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp < 0xE000) {
          fail("lone low surrogate \\u escape");
        }
        append_utf8(out, cp);
        break;
      }
      default:
        --pos_;
        fail(std::string("unknown escape '\\") + e + "'");
      }
    }
  }
};

} // namespace

JsonValue parse_json(std::string_view text, const std::string &what) {
  return Parser(text, what, /*wide_integers=*/false).document();
}

JsonValue parse_json_wide(std::string_view text, const std::string &what) {
  return Parser(text, what, /*wide_integers=*/true).document();
}

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\r': out += "\\r"; break;
    case '\t': out += "\\t"; break;
    case '\b': out += "\\b"; break;
    case '\f': out += "\\f"; break;
    default:
      if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
        out += buf;
      } else {
        out += c; // UTF-8 bytes pass through unchanged
      }
    }
  }
  out += '"';
  return out;
}

JsonValue json_null() { return JsonValue(); }

JsonValue json_bool(bool v) {
  JsonValue j;
  j.kind = JsonValue::Kind::Bool;
  j.boolean = v;
  return j;
}

JsonValue json_integer(int64_t v) {
  JsonValue j;
  j.kind = JsonValue::Kind::Integer;
  j.integer = v;
  j.number = static_cast<double>(v);
  return j;
}

JsonValue json_string(std::string s) {
  JsonValue j;
  j.kind = JsonValue::Kind::String;
  j.string = std::move(s);
  return j;
}

namespace {

// Shortest text that reads back as `x`; a whole number keeps ".0", as Python prints a float.
std::string shortest_number(double x) {
  std::string s = shortest_exact_text(x);
  if (s.find_first_of(".eEn") == std::string::npos) // not 1e-05, nan or inf
    s += ".0";
  return s;
}

void format_into(const JsonValue &v, int depth, std::string &out) {
  const std::string pad(static_cast<size_t>(2 * (depth + 1)), ' '), close(static_cast<size_t>(2 * depth), ' ');
  switch (v.kind) {
  case JsonValue::Kind::Null: out += "null"; break;
  case JsonValue::Kind::Bool: out += v.boolean ? "true" : "false"; break;
  case JsonValue::Kind::Integer: out += std::to_string(v.integer); break;
  case JsonValue::Kind::Number: out += v.wide_digits.empty() ? shortest_number(v.number) : v.wide_digits; break;
  case JsonValue::Kind::String: out += json_quote(v.string); break;
  case JsonValue::Kind::Array:
    if (v.array.empty()) {
      out += "[]";
      break;
    }
    out += "[\n";
    for (size_t i = 0; i < v.array.size(); ++i) {
      out += pad;
      format_into(v.array[i], depth + 1, out);
      out += i + 1 < v.array.size() ? ",\n" : "\n";
    }
    out += close + "]";
    break;
  case JsonValue::Kind::Object:
    if (v.object.empty()) {
      out += "{}";
      break;
    }
    out += "{\n";
    for (size_t i = 0; i < v.object.size(); ++i) {
      out += pad + json_quote(v.object[i].first) + ": ";
      format_into(v.object[i].second, depth + 1, out);
      out += i + 1 < v.object.size() ? ",\n" : "\n";
    }
    out += close + "}";
    break;
  }
}

} // namespace

std::string format_json(const JsonValue &v) {
  std::string out;
  format_into(v, 0, out);
  return out;
}

void set_member(JsonValue &object, const std::string &key, JsonValue value) {
  if (!object.is_object())
    throw Error("set_member(\"" + key + "\"): not a JSON object but " + object.brief());
  auto &members = object.object;
  for (auto &member : members)
    if (member.first == key) {
      member.second = std::move(value);
      return;
    }
  auto at = members.begin();
  while (at != members.end() && at->first < key)
    ++at;
  members.insert(at, {key, std::move(value)});
}

} // namespace megart
