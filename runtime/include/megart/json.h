// Just enough JSON for the runtime's own files (safetensors headers, the Hugging Face and PEFT
// configs of a checkpoint): parse into a tree that keeps object key order, print it back, and
// escape strings for writing. Integers are kept exact as int64.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace megart {

class JsonValue {
public:
  enum class Kind { Null, Bool, Integer, Number, String, Array, Object };

  Kind kind = Kind::Null;
  bool boolean = false;
  int64_t integer = 0; // Kind::Integer
  double number = 0;   // Kind::Number (and Integer, converted)
  // A Kind::Number parse_json_wide read from an integer past 64 bits: its digits, which
  // format_json writes back (Python reads and writes such an integer exactly, as an int).
  std::string wide_digits;
  std::string string;
  std::vector<JsonValue> array;
  std::vector<std::pair<std::string, JsonValue>> object; // in file order, keys unique

  bool is_object() const { return kind == Kind::Object; }
  bool is_array() const { return kind == Kind::Array; }
  bool is_string() const { return kind == Kind::String; }
  bool is_integer() const { return kind == Kind::Integer; }
  // Member of an object, or nullptr.
  const JsonValue *get(std::string_view key) const;
  // "string", "integer", ... for error messages.
  static const char *kind_name(Kind kind);
  // A short rendering of this value for error messages (truncated).
  std::string brief() const;
};

// Parses a complete JSON document. `what` names the source in error messages, e.g.
// "model.safetensors: header". Duplicate object keys are an error.
JsonValue parse_json(std::string_view text, const std::string &what);
// The same, reading an integer past 64 bits as a double (Kind::Number, its digits kept for
// format_json): for files of other libraries, which Python's json module wrote (transformers'
// tokenizer_config.json has model_max_length 1000000000000000019884624838656).
JsonValue parse_json_wide(std::string_view text, const std::string &what);

// `s` as a quoted JSON string literal.
std::string json_quote(std::string_view s);

JsonValue json_null();
JsonValue json_bool(bool v);
JsonValue json_integer(int64_t v);
JsonValue json_string(std::string s);

// `v` as Python's json.dumps(v, indent=2) writes it (what transformers and PEFT write): numbers
// in their shortest exact form, a whole Number with ".0" (it stays a float) unless it was read
// from a wide integer (its digits again), strings as json_quote. Ends without a newline.
std::string format_json(const JsonValue &v);

// Sets `key` of the object `object` to `value`: in place when it is there, else inserted
// before the first key that sorts after it (configs are written with sorted keys).
void set_member(JsonValue &object, const std::string &key, JsonValue value);

} // namespace megart
