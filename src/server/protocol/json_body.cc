#include "server/protocol/json_body.h"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "server/protocol/safe_text.h"

namespace ember::server {
namespace {

using json = nlohmann::ordered_json;

// Where the parser is, kept from its callback events, so that an error (which the parser reports
// without a location in the document) can say which field it is in.
class JsonLocation {
 public:
  // Returns false to discard a container that opens too deep: nothing under it is built.
  bool OnEvent(int depth, json::parse_event_t event, const json& parsed, int max_depth) {
    // Past the first container that is too deep the body is refused: no need to follow it.
    if (too_deep_) return false;
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= max_depth) {
          too_deep_ = true;
          too_deep_field_ = TopField();
          return false;
        }
        frames_.emplace_back().is_array = event == json::parse_event_t::array_start;
        return true;
      case json::parse_event_t::key:
        if (!frames_.empty()) {
          frames_.back().key = parsed.get<std::string>();
          frames_.back().in_value = true;
        }
        return true;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!frames_.empty()) frames_.pop_back();
        ValueDone();
        return true;
      case json::parse_event_t::value:
        ValueDone();
        return true;
    }
    return true;
  }

  bool too_deep() const { return too_deep_; }
  // The top-level field that nests too deep.
  const std::string& too_deep_field() const { return too_deep_field_; }

  // "messages[0].content"; empty at the top level.
  std::string Path() const {
    std::string path;
    for (const Frame& f : frames_) {
      if (f.is_array) {
        path += fmt::format("[{}]", f.count);
      } else if (f.in_value) {
        if (!path.empty()) path += '.';
        path += SafeText(f.key, 40);
      }
    }
    return path;
  }
  // The top-level field the parser is in (OpenAI's `param`), or empty.
  std::string TopField() const {
    if (frames_.empty() || frames_[0].is_array || !frames_[0].in_value) return "";
    return SafeText(frames_[0].key, 40);
  }
  // True when the parser stopped between the members of an object (in a key, not a value).
  bool InKey() const { return !frames_.empty() && !frames_.back().is_array && !frames_.back().in_value; }

 private:
  struct Frame {
    bool is_array = false;
    size_t count = 0;       // arrays: elements completed, so the index of the one being read
    std::string key;        // objects: the member being read
    bool in_value = false;  // objects: past the key, reading its value
  };
  void ValueDone() {
    if (frames_.empty()) return;
    if (frames_.back().is_array) ++frames_.back().count;
    else frames_.back().in_value = false;
  }

  std::vector<Frame> frames_;
  bool too_deep_ = false;
  std::string too_deep_field_;
};

// nlohmann's description of a parse error without its prefix and without "last read: '...'",
// which quotes the request's bytes.
std::string Describe(const nlohmann::json::parse_error& e) {
  std::string what = e.what();
  if (const size_t colon = what.find(": "); colon != std::string::npos) what = what.substr(colon + 2);
  if (const size_t column = what.find("column "); column != std::string::npos) {
    if (const size_t colon = what.find(": ", column); colon != std::string::npos) what = what.substr(colon + 2);
  }
  if (const size_t quote = what.find("; last read: "); quote != std::string::npos) {
    const size_t expected = what.rfind("; expected ");
    what = what.substr(0, quote) + (expected != std::string::npos && expected > quote ? what.substr(expected) : "");
  }
  return SafeText(what, 200);
}

std::string Where(const JsonLocation& at) {
  const std::string path = at.Path();
  if (at.InKey()) return path.empty() ? " in a key" : fmt::format(" in a key of '{}'", path);
  return path.empty() ? "" : fmt::format(" in '{}'", path);
}

ApiError TooDeep(const JsonLocation& at, int max_depth) {
  const std::string& field = at.too_deep_field();
  return BadRequest(fmt::format("the request body nests arrays and objects deeper than {} levels{}", max_depth,
                                field.empty() ? "" : fmt::format(" (in '{}')", field)),
                    field);
}

}  // namespace

std::variant<json, ApiError> ParseJsonObject(std::string_view text, int max_depth) {
  if (text.empty()) return BadRequest("the request body is empty; send a JSON object");
  JsonLocation at;
  json body;
  try {
    body = json::parse(
        text, [&](int depth, json::parse_event_t event, json& parsed) { return at.OnEvent(depth, event, parsed, max_depth); });
  } catch (const nlohmann::json::parse_error& e) {
    if (at.too_deep()) return TooDeep(at, max_depth);
    const std::string description = Describe(e);
    if (description.find("UTF-8") != std::string::npos) {
      return BadRequest(fmt::format("the request body has invalid UTF-8{} (byte {}); send text as UTF-8", Where(at),
                                    e.byte),
                        at.TopField());
    }
    return BadRequest(fmt::format("the request body is not valid JSON{} (byte {}): {}", Where(at), e.byte,
                                  description),
                      at.TopField());
  } catch (const nlohmann::json::out_of_range&) {
    // The parser's only range error: a number beyond a double (1e999).
    return BadRequest(fmt::format("a number{} is too large to represent", Where(at)), at.TopField());
  }
  if (at.too_deep()) return TooDeep(at, max_depth);
  if (!body.is_object()) return BadRequest("the request body must be a JSON object");
  return body;
}

}  // namespace ember::server
