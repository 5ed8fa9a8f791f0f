#include "core/json_input.h"

#include <fmt/format.h>
#include <set>
#include <vector>

#include "core/error.h"
#include "core/input_limits.h"

namespace flashcheck {
namespace {

using nlohmann::json;

// Thrown from the parser callback; carries the JSON path at which the limit was hit.
struct Refused {
  std::string path, reason;
};

// Follows the parser's events to know the JSON path of the value being read and the keys seen in each
// open object. nlohmann's parser itself is iterative, so deep input reaches the depth check here without
// recursing.
class PathTracker {
 public:
  bool on_event(int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= limits::kMaxJsonDepth)
          throw Refused{path(), fmt::format("nesting deeper than {} levels", limits::kMaxJsonDepth)};
        frames_.push_back({event == json::parse_event_t::array_start, 0, false, {}, {}});
        break;
      case json::parse_event_t::key: {
        Frame& f = frames_.back();
        f.key = parsed.get_ref<const std::string&>();
        f.keyed = true;
        if (static_cast<std::int64_t>(f.key.size()) > limits::kMaxJsonString)
          throw Refused{path(), fmt::format("a key of {} bytes; the limit is {}", f.key.size(), limits::kMaxJsonString)};
        if (!f.keys.insert(f.key).second) throw Refused{path(), "duplicate key"};
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        frames_.pop_back();
        next_element();
        break;
      case json::parse_event_t::value:
        if (parsed.is_string() && static_cast<std::int64_t>(parsed.get_ref<const std::string&>().size()) > limits::kMaxJsonString)
          throw Refused{path(), fmt::format("a string of {} bytes; the limit is {}",
                                            parsed.get_ref<const std::string&>().size(), limits::kMaxJsonString)};
        next_element();
        break;
    }
    return true;
  }

  // "cases[2].seqs[0].q_len": where the parser is.
  std::string path() const {
    std::string p;
    for (const Frame& f : frames_) {
      if (f.array) p += fmt::format("[{}]", f.index);
      else if (f.keyed) p += (p.empty() ? "" : ".") + f.key;
    }
    return p;
  }

 private:
  struct Frame {
    bool array = false;
    std::int64_t index = 0;   // arrays: the element being read
    bool keyed = false;       // objects: a key has been read
    std::string key;          // objects: the key being read
    std::set<std::string> keys;
  };
  void next_element() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
  }
  std::vector<Frame> frames_;
};

}  // namespace

nlohmann::json parse_json_input(std::string_view text, const std::string& source) {
  PathTracker tracker;
  try {
    return json::parse(text.begin(), text.end(),
                       [&tracker](int depth, json::parse_event_t event, json& parsed) {
                         return tracker.on_event(depth, event, parsed);
                       });
  } catch (const Refused& r) {
    throw InputError(source, r.path, r.reason);
  } catch (const json::parse_error& e) {  // the path says where in the document the text went wrong
    throw InputError(source, tracker.path(), fmt::format("malformed JSON at byte {}: {}", e.byte, e.what()));
  } catch (const json::exception& e) {  // out_of_range 406: a number literal beyond double's range
    throw InputError(source, tracker.path(), fmt::format("malformed JSON: {}", e.what()));
  }
}

}  // namespace flashcheck
