// Fixture files: a JSON descriptor (schema "flashcheck.fixture/1") holding one or more KernelCases, what
// each kernel is expected to do on them, where the case came from, and optionally a safetensors file of
// captured tensors that replace the generated ones. fixtures/README.md documents the format.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/case_tensors.h"
#include "core/files.h"
#include "core/kernel_case.h"
#include "core/model_case.h"
#include "core/verdict.h"

namespace flashcheck {

inline constexpr const char* kFixtureSchema = "flashcheck.fixture/1";

// What a kernel is expected to do on a case. Without an entry a kernel is expected to pass (or to be
// unsupported by its contract, which the replay reports as such).
struct Expectation {
  VerdictKind verdict = VerdictKind::kPass;
  std::string reason_contains;        // a fail/error/crash must mention this (empty: anything)
  bool run_outside_contract = false;  // run even though the contract excludes the case (known crashes)
  std::string why;                    // the analysis: why this is the expected outcome
};

struct FixtureCase {
  KernelCase kcase;
  std::string note;
  std::map<std::string, Expectation> expect;  // by kernel name
  std::optional<CaseTensors> tensors;         // captured tensors, when the fixture has them
};

// A model-level case (what an attention layer of a transformers model receives) and what each profile of
// the HF flash path does on it, by profile name ("hf-main", "hf-4.55", ...). Without an entry a profile is
// expected to pass. Replay checks the integration property (properties/integration.h).
struct ModelFixtureCase {
  ModelCase mcase;
  std::string note;
  std::map<std::string, Expectation> expect;
};

struct Fixture {
  std::string path;  // where it was loaded from or will be saved to
  std::string title;
  std::string source;       // link to the report this fixture reproduces
  std::string description;
  std::vector<FixtureCase> cases;
  std::vector<ModelFixtureCase> model_cases;
  std::vector<std::string> profiles;  // the profiles model cases replay on (empty: every profile)
  std::string tensors_file;  // safetensors file next to the descriptor, "" when none
  std::string property = "conformance";  // what replay checks on every case
  // Found counterexamples carry how they were found.
  std::string found_by;      // "flashcheck fuzz --kernel K --property P --seed S"
  std::string replay;        // one-line replay command
  std::string rc_reproduce;  // RapidCheck reproduce string (short-lived: tied to the generator code)
};

// Loads and validates a fixture; throws InputError naming the file, field and reason. The file must be a
// regular file within limits::kMaxFixtureBytes; its `tensors` must name a regular file inside its folder.
Fixture load_fixture(const std::string& path);
// The same, from the descriptor's text (`path` names it and locates its tensors file).
Fixture fixture_from_text(std::string_view text, const std::string& path);

// Writes the tensors file (when cases carry tensors), then the descriptor, each atomically (core/files.h).
// With Overwrite::kKeep an existing descriptor is left as it is and the result is false. Throws OutputError.
bool save_fixture(const Fixture& f, Overwrite mode = Overwrite::kReplace);

// Every *.json entry under a directory but folders (recursively, sorted; a dangling link or a FIFO is listed, so that
// reading it reports it), or the file itself.
std::vector<std::string> find_fixture_files(const std::string& path);

// Stable 16-hex-digit hash of a case's canonical JSON: names found fixtures and de-duplicates them.
std::string content_hash(const KernelCase& c);
std::string content_hash(const ModelCase& m);

}  // namespace flashcheck
