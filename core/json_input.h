// Parsing JSON that comes from outside (fixtures, in-flight descriptors, safetensors headers) within the
// limits of core/input_limits.h. nlohmann's parser accepts duplicate keys silently (the last one wins),
// has no depth limit for the recursive code that later walks the document (dump(), destructors), and
// throws exception types other than parse_error for number literals out of range. Here every problem is
// an InputError naming the source, the JSON path and the reason.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace flashcheck {

// Throws InputError(source, path, reason), the path being where the parser was, for malformed JSON, nesting deeper than kMaxJsonDepth, strings
// or keys longer than kMaxJsonString, duplicate keys, or number literals outside double's range.
nlohmann::json parse_json_input(std::string_view text, const std::string& source);

}  // namespace flashcheck
