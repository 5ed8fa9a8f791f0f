// Deliberately broken kernels. Each is tiled-cpu with one realistic defect switched on; it claims
// tiled-cpu's contract, so every property runs it on exactly the cases it would run tiled-cpu on.
#pragma once

#include <string>
#include <vector>

namespace flashcheck {

class Registry;

struct MutantInfo {
  std::string name;         // "mutant-<defect>"
  std::string description;  // one line: the defect
  std::string imitates;     // the real bug it imitates, or "" when it is a generic class
  bool backward = false;    // a backward defect: the forward is tiled-cpu's own, the gradient properties hunt it
};

const std::vector<MutantInfo>& mutant_catalog();
void register_mutants(Registry& r);

}  // namespace flashcheck
