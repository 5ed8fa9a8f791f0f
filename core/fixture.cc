#include "core/fixture.h"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/case_json.h"
#include "core/detail/json_reader.h"
#include "core/error.h"
#include "core/geometry.h"
#include "core/hf_profiles.h"
#include "core/model_case_json.h"
#include "core/safetensors.h"

namespace flashcheck {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string tensor_key(std::size_t i, const char* name) { return fmt::format("cases.{}.{}", i, name); }

void attach_tensors(Fixture& f, const std::string& path) {
  const SafetensorsFile file = read_safetensors(path);
  for (std::size_t i = 0; i < f.cases.size(); ++i) {
    FixtureCase& fc = f.cases[i];
    if (!file.tensors.count(tensor_key(i, "q"))) continue;  // this case uses generated tensors
    CaseTensors t;
    const CaseTensors want = materialize(fc.kcase);  // shapes to expect
    auto load = [&](const char* name, HostTensor& dst, const HostTensor& like) {
      const auto it = file.tensors.find(tensor_key(i, name));
      if (it == file.tensors.end()) {
        if (like.numel() > 0) throw InputError(path, tensor_key(i, name), "missing tensor");
        dst = like;
        return;
      }
      dst.shape = it->second.shape;
      try {
        dst.data = load_floats(it->second);
      } catch (const std::invalid_argument& e) {
        throw InputError(path, tensor_key(i, name), e.what());
      }
    };
    load("q", t.q, want.q);
    load("k", t.k, want.k);
    load("v", t.v, want.v);
    load("k_new", t.k_new, want.k_new);
    load("v_new", t.v_new, want.v_new);
    t.block_table = want.block_table;
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
  std::ifstream in(path);
  if (!in) throw InputError(path, "", "cannot open file");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::parse_error& e) {
    throw InputError(path, "", fmt::format("malformed JSON at byte {}: {}", e.byte, e.what()));
  }
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
    attach_tensors(f, (fs::path(path).parent_path() / f.tensors_file).string());
  }
  return f;
}

void save_fixture(const Fixture& f) {
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
    const fs::path tpath = fs::path(f.path).parent_path() / tensors_name;
    write_safetensors(tpath.string() + ".tmp", tensors);
    fs::rename(tpath.string() + ".tmp", tpath);
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
  const std::string tmp = f.path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) throw InputError(f.path, "", "cannot write file");
    out << j.dump(2) << "\n";
    if (!out) throw InputError(f.path, "", "write failed");
  }
  fs::rename(tmp, f.path);
}

std::vector<std::string> find_fixture_files(const std::string& path) {
  std::vector<std::string> files;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::recursive_directory_iterator(path))
      if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path().string());
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
