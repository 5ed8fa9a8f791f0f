#include "core/fixture.h"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/case_json.h"
#include "core/checked.h"
#include "core/detail/json_reader.h"
#include "core/error.h"
#include "core/geometry.h"
#include "core/files.h"
#include "core/hf_profiles.h"
#include "core/input_limits.h"
#include "core/json_input.h"
#include "core/model_case_json.h"
#include "core/safetensors.h"

namespace flashcheck {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string tensor_key(std::size_t i, const char* name) { return fmt::format("cases.{}.{}", i, name); }

// The tensors file a fixture names: a regular file inside the fixture's folder. No absolute path, no "..",
// and after resolving symlinks still inside the folder.
std::string tensors_path(const std::string& fixture, const std::string& name) {
  const fs::path rel(name);
  if (name.empty()) throw InputError(fixture, "tensors", "empty file name");
  if (rel.is_absolute()) throw InputError(fixture, "tensors", "must be a file name relative to the fixture's folder, not an absolute path");
  for (const fs::path& part : rel)
    if (part == "..") throw InputError(fixture, "tensors", "must not leave the fixture's folder (\"..\")");
  const fs::path folder = fs::path(fixture).parent_path().empty() ? fs::path(".") : fs::path(fixture).parent_path();
  std::error_code ec;
  const fs::path root = fs::canonical(folder, ec);
  if (ec) throw InputError(fixture, "tensors", "cannot resolve the fixture's folder: " + ec.message());
  const fs::path target = fs::canonical(folder / rel, ec);
  if (ec) throw InputError(fixture, "tensors", fmt::format("cannot open \"{}\": {}", name, ec.message()));
  const std::string r = root.string() + "/", t = target.string();
  if (t.compare(0, r.size(), r) != 0)
    throw InputError(fixture, "tensors", fmt::format("\"{}\" resolves to {}, outside the fixture's folder", name, t));
  return (folder / rel).string();
}

void attach_tensors(Fixture& f, const std::string& path);

// The fixture's tensors: any problem with them is reported as the fixture's `tensors` field, naming the
// tensors file (and the tensor) in the reason.
void attach_tensors_of(Fixture& f, const std::string& fixture, const std::string& name) {
  const std::string path = tensors_path(fixture, name);
  try {
    attach_tensors(f, path);
  } catch (const InputError& e) {
    throw InputError(fixture, "tensors", e.what());
  }
}

void attach_tensors(Fixture& f, const std::string& path) {
  // The file can hold no more than the cases' tensors at 8 bytes an element (F64), plus the header.
  std::int64_t max_bytes = limits::kMaxSafetensorsHeaderBytes + 8;
  std::vector<TensorShapes> shapes;
  for (const FixtureCase& fc : f.cases) {
    shapes.push_back(tensor_shapes(fc.kcase));
    for (const auto* s : {&shapes.back().q, &shapes.back().k, &shapes.back().v, &shapes.back().k_new, &shapes.back().v_new,
                          &shapes.back().dout})
      if (!s->empty()) {
        std::int64_t numel = 8;
        for (std::int64_t d : *s) numel = size_mul(numel, d);
        max_bytes = size_add(max_bytes, numel);
      }
  }
  const SafetensorsFile file = read_safetensors(path, max_bytes);
  for (std::size_t i = 0; i < f.cases.size(); ++i) {
    FixtureCase& fc = f.cases[i];
    if (!file.tensors.count(tensor_key(i, "q"))) continue;  // this case uses generated tensors
    CaseTensors t;
    auto load = [&](const char* name, HostTensor& dst, const std::vector<std::int64_t>& want) {
      const auto it = file.tensors.find(tensor_key(i, name));
      if (it == file.tensors.end()) {
        if (!want.empty()) throw InputError(path, tensor_key(i, name), "missing tensor");
        return;
      }
      if (it->second.shape != want)
        throw InputError(path, tensor_key(i, name),
                         fmt::format("tensor '{}' has shape ({}), the case needs ({})", name, fmt::join(it->second.shape, ", "),
                                     fmt::join(want, ", ")));
      dst.shape = it->second.shape;
      try {
        dst.data = load_floats(it->second);
      } catch (const std::invalid_argument& e) {
        throw InputError(path, tensor_key(i, name), e.what());
      }
    };
    load("q", t.q, shapes[i].q);
    load("k", t.k, shapes[i].k);
    load("v", t.v, shapes[i].v);
    load("k_new", t.k_new, shapes[i].k_new);
    load("v_new", t.v_new, shapes[i].v_new);
    load("dout", t.dout, shapes[i].dout);
    t.block_table = block_table(fc.kcase);
    const std::string problem = check_shapes(fc.kcase, t);
    if (!problem.empty()) throw InputError(path, fmt::format("cases.{}", i), problem);
    fc.tensors = std::move(t);
  }
}

std::map<std::string, Expectation> read_expectations(const detail::JsonReader& cr, const json& node) {
  std::map<std::string, Expectation> out;
  if (!cr.has("expect")) return out;
  const detail::JsonReader ex = cr.object("expect");
  for (const auto& [who, spec] : node.at("expect").items()) {
    if (who.empty()) ex.fail(who, "empty kernel or profile name");
    const detail::JsonReader e = ex.object(who);
    e.only({"verdict", "reason_contains", "run_outside_contract", "why"});
    Expectation x;
    const std::string v = e.string("verdict");
    const auto kind = parse_verdict_kind(v);
    if (!kind) e.fail("verdict", fmt::format("unknown verdict \"{}\"", v));
    x.verdict = *kind;
    x.reason_contains = e.string("reason_contains", "");
    x.run_outside_contract = e.boolean("run_outside_contract", false);
    x.why = e.string("why", "");
    out[who] = x;
  }
  return out;
}

json write_expectations(const std::map<std::string, Expectation>& expect) {
  json out = json::object();
  for (const auto& [who, x] : expect) {
    json e = {{"verdict", to_string(x.verdict)}};
    if (!x.reason_contains.empty()) e["reason_contains"] = x.reason_contains;
    if (x.run_outside_contract) e["run_outside_contract"] = true;
    if (!x.why.empty()) e["why"] = x.why;
    out[who] = e;
  }
  return out;
}

}  // namespace

Fixture load_fixture(const std::string& path) {
  return fixture_from_text(read_input_file(path, limits::kMaxFixtureBytes), path);
}

Fixture fixture_from_text(std::string_view text, const std::string& path) {
  const json j = parse_json_input(text, path);
  const detail::JsonReader r(j, path, "");
  r.only({"schema", "title", "source", "description", "property", "cases", "tensors", "found_by", "replay",
          "rc_reproduce", "model_cases", "profiles"});
  const std::string schema = r.string("schema");
  if (schema != kFixtureSchema)
    r.fail("schema", fmt::format("\"{}\" is not a schema this version reads (expected \"{}\")", schema, kFixtureSchema));
  Fixture f;
  f.path = path;
  f.title = r.string("title", "");
  f.source = r.string("source", "");
  f.description = r.string("description", "");
  f.found_by = r.string("found_by", "");
  f.property = r.string("property", "conformance");
  f.replay = r.string("replay", "");
  f.rc_reproduce = r.string("rc_reproduce", "");
  if (r.has("cases")) {
    const json& cases = r.array("cases");
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const std::string at = fmt::format("cases[{}]", i);
      FixtureCase fc;
      fc.kcase = case_from_json(cases[i], path, at);
      const detail::JsonReader cr(cases[i], path, at);
      fc.note = cr.string("note", "");
      fc.expect = read_expectations(cr, cases[i]);
      f.cases.push_back(std::move(fc));
    }
  }
  if (r.has("model_cases")) {
    const json& cases = r.array("model_cases");
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const std::string at = fmt::format("model_cases[{}]", i);
      ModelFixtureCase mc;
      mc.mcase = model_case_from_json(cases[i], path, at);
      const detail::JsonReader cr(cases[i], path, at);
      mc.note = cr.string("note", "");
      mc.expect = read_expectations(cr, cases[i]);
      for (const auto& [profile, x] : mc.expect)
        if (!hf::parse_profile(profile))
          cr.fail("expect." + profile, fmt::format("unknown profile (expected {})", hf::profile_name_list()));
      f.model_cases.push_back(std::move(mc));
    }
  }
  if (f.cases.empty() && f.model_cases.empty()) r.fail("cases", "the fixture has no cases and no model_cases");
  if (r.has("profiles")) {
    const json& ps = r.array("profiles");
    for (std::size_t i = 0; i < ps.size(); ++i) {
      const std::string name = r.as_string(ps[i], fmt::format("profiles[{}]", i));
      if (!hf::parse_profile(name)) r.fail(fmt::format("profiles[{}]", i), "unknown profile \"" + name + "\"");
      f.profiles.push_back(name);
    }
  }
  if (r.has("tensors")) {
    f.tensors_file = r.string("tensors");
    attach_tensors_of(f, path, f.tensors_file);
  }
  return f;
}

bool save_fixture(const Fixture& f, Overwrite mode) {
  json cases = json::array();
  SafetensorsFile tensors;
  for (std::size_t i = 0; i < f.cases.size(); ++i) {
    const FixtureCase& fc = f.cases[i];
    json c = case_to_json(fc.kcase);
    if (!fc.note.empty()) c["note"] = fc.note;
    if (!fc.expect.empty()) c["expect"] = write_expectations(fc.expect);
    cases.push_back(std::move(c));
    if (fc.tensors) {
      const CaseTensors& t = *fc.tensors;
      tensors.tensors[tensor_key(i, "q")] = store_floats(t.q.data, t.q.shape, fc.kcase.dtype);
      tensors.tensors[tensor_key(i, "k")] = store_floats(t.k.data, t.k.shape, fc.kcase.dtype);
      tensors.tensors[tensor_key(i, "v")] = store_floats(t.v.data, t.v.shape, fc.kcase.dtype);
      if (!t.k_new.empty()) {
        tensors.tensors[tensor_key(i, "k_new")] = store_floats(t.k_new.data, t.k_new.shape, fc.kcase.dtype);
        tensors.tensors[tensor_key(i, "v_new")] = store_floats(t.v_new.data, t.v_new.shape, fc.kcase.dtype);
      }
      if (!t.dout.empty()) tensors.tensors[tensor_key(i, "dout")] = store_floats(t.dout.data, t.dout.shape, fc.kcase.dtype);
    }
  }
  json j = {{"schema", kFixtureSchema}, {"title", f.title}};
  if (!f.source.empty()) j["source"] = f.source;
  if (!f.description.empty()) j["description"] = f.description;
  if (f.property != "conformance") j["property"] = f.property;
  if (!f.found_by.empty()) j["found_by"] = f.found_by;
  if (!f.replay.empty()) j["replay"] = f.replay;
  if (!f.rc_reproduce.empty()) j["rc_reproduce"] = f.rc_reproduce;
  std::string tensors_name;
  if (!tensors.tensors.empty()) {
    tensors_name = fs::path(f.path).stem().string() + ".safetensors";
    j["tensors"] = tensors_name;
    tensors.metadata["format"] = "flashcheck";
  }
  if (!f.cases.empty()) j["cases"] = std::move(cases);
  if (!f.model_cases.empty()) {
    json mcases = json::array();
    for (const ModelFixtureCase& mc : f.model_cases) {
      json c = model_case_to_json(mc.mcase);
      if (!mc.note.empty()) c["note"] = mc.note;
      if (!mc.expect.empty()) c["expect"] = write_expectations(mc.expect);
      mcases.push_back(std::move(c));
    }
    j["model_cases"] = std::move(mcases);
    if (!f.profiles.empty()) j["profiles"] = f.profiles;
  }
  // The tensors first: a descriptor never names a tensors file that is not complete on disk.
  if (!tensors.tensors.empty()) {
    const std::string tpath = (fs::path(f.path).parent_path() / tensors_name).string();
    if (!write_file_atomic(tpath, encode_safetensors(tensors), mode)) return false;
  }
  return write_file_atomic(f.path, j.dump(2) + "\n", mode);
}

std::vector<std::string> find_fixture_files(const std::string& path) {
  std::vector<std::string> files;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    // Links to folders are not followed (a link loop cannot make the walk endless); an unreadable folder
    // is an error, not a silently smaller corpus.
    fs::recursive_directory_iterator it(path, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      // Every *.json entry but a folder: a dangling link or a FIFO named like a fixture is reported when it is read,
      // not skipped (a corpus that lost a file must not replay clean).
      std::error_code type_ec;
      if (it->path().extension() == ".json" && !it->is_directory(type_ec)) files.push_back(it->path().string());
    }
    if (ec) throw InputError(path, "", "cannot list the folder: " + ec.message());
    std::sort(files.begin(), files.end());
  } else {
    files.push_back(path);
  }
  return files;
}

namespace {

std::string fnv1a_hex(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
}

}  // namespace

std::string content_hash(const KernelCase& c) {
  KernelCase anon = c;
  anon.name.clear();
  return fnv1a_hex(case_to_json(anon).dump());
}

std::string content_hash(const ModelCase& m) {
  ModelCase anon = m;
  anon.name.clear();
  return fnv1a_hex(model_case_to_json(anon).dump());
}

}  // namespace flashcheck
