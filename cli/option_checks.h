// Range checks of the command line's counts, times and sizes, with the documented limits (docs/HARDENING.md).
// A value outside its range is a usage error (exit 2) with a message naming the option, never a silent
// reinterpretation (a negative count, a NaN time) or a run that cannot end.
#pragma once

#include <cstdint>
#include <string_view>

namespace flashcheck::cli {

// Cases a fuzz run or the gate may be asked for: beyond any campaign (days of CPU), far from overflow.
inline constexpr std::int64_t kMaxFuzzCases = 10'000'000'000;
// Cases a command generates up front and holds in memory (bench --cases, export --generated).
inline constexpr std::int64_t kMaxPreGeneratedCases = 100'000;
// bench --in-flight: threads on one GPU; beyond this the streams only contend.
inline constexpr std::int64_t kMaxCasesInFlight = 32;
// Seconds of any time option: 30 days.
inline constexpr double kMaxSeconds = 30.0 * 24 * 3600;

// Each prints "flashcheck <command>: <option> ... is outside [lo, hi]" and returns false when out of range.
bool check_count(std::string_view command, std::string_view option, std::int64_t value, std::int64_t lo, std::int64_t hi);
// A finite number of seconds in [lo, hi] (NaN and infinities are refused).
bool check_seconds(std::string_view command, std::string_view option, double value, double lo, double hi);
// --timeout: a finite number of seconds in (0, kMaxSeconds].
bool check_timeout(std::string_view command, double value);

}  // namespace flashcheck::cli
