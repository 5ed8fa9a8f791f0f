// Files written here must load in Python's `safetensors`, and files it writes must load here. Runs the
// Python interpreter that provides LibTorch (ci/setup.sh installs `safetensors` next to torch).
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/safetensors.h"

namespace flashcheck {
namespace {

namespace fs = std::filesystem;

TEST(SafetensorsInterop, PythonReadsOurFilesAndWeReadPythons) {
  const fs::path dir = fs::temp_directory_path() / "fc_st_interop";
  fs::create_directories(dir);
  SafetensorsFile f;
  f.tensors["cases.0.q"] = store_floats({1.0f, -0.10009765625f, 3.140625f, 0.0f}, {2, 2}, DType::kBF16);
  f.tensors["cases.0.k"] = store_floats({0.0999755859375f, 2.0f}, {2}, DType::kF16);
  f.tensors["cases.0.v"] = store_floats({0.1f}, {1}, DType::kF32);
  f.tensors["table"] = store_int32({3, -1}, {1, 2});
  f.metadata["format"] = "flashcheck";
  write_safetensors((dir / "ours.safetensors").string(), f);
  // Python checks every value we wrote, then writes its own file with the same content.
  const std::string script = fmt::format(R"PY(
import sys, torch
from safetensors.torch import load_file, save_file
from safetensors import safe_open
t = load_file('{0}/ours.safetensors')
assert t['cases.0.q'].dtype == torch.bfloat16 and t['cases.0.q'].tolist() == [[1.0, -0.10009765625], [3.140625, 0.0]], t
assert t['cases.0.k'].dtype == torch.float16 and t['cases.0.k'].tolist() == [0.0999755859375, 2.0]
assert t['cases.0.v'].dtype == torch.float32 and t['cases.0.v'].item() == torch.tensor(0.1, dtype=torch.float32).item()
assert t['table'].dtype == torch.int32 and t['table'].tolist() == [[3, -1]]
with safe_open('{0}/ours.safetensors', 'pt') as h: assert h.metadata() == {{'format': 'flashcheck'}}
save_file(t, '{0}/theirs.safetensors', metadata={{'from': 'python'}})
)PY",
                                         dir.string());
  const std::string cmd = fmt::format("'{}' -c \"$(cat <<'EOF'\n{}\nEOF\n)\"", FLASHCHECK_TEST_PYTHON, script);
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "python could not read our file: " << cmd;
  const SafetensorsFile g = read_safetensors((dir / "theirs.safetensors").string());
  EXPECT_EQ(g.metadata.at("from"), "python");
  for (const auto& [name, t] : f.tensors) {
    EXPECT_EQ(g.tensors.at(name).dtype, t.dtype) << name;
    EXPECT_EQ(g.tensors.at(name).shape, t.shape) << name;
    EXPECT_EQ(g.tensors.at(name).bytes, t.bytes) << name;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace flashcheck
