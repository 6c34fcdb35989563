// The two files of expert placement, as JSON:
//
// Expert load (`ember bench ... --expert-load-out FILE`; what `ember placement --counts` reads):
//   {"num_experts": 256, "top_k": 8, "num_layers": 62,
//    "layers": {"0": [tokens routed to expert 0, to expert 1, ...], "1": [...], ...}}
//   One list of E non-negative counts per counted MoE layer (decoder layer numbers, as strings
//   since JSON keys are). "num_layers" (the model's decoder layers) is optional.
//
// Expert placement (`--expert-placement FILE`; what `ember placement --out` writes):
//   {"num_experts": 256, "ep_size": 8, "num_layers": 62,
//    "default": [rank of expert 0, rank of expert 1, ...],
//    "layers": {"3": [rank of expert 0, ...], ...}}
//   "default" applies to every layer not under "layers" (absent: the contiguous layout, rank r
//   holding experts [r E / N, (r + 1) E / N)); "layers" and "num_layers" are optional. Every list
//   has E ranks in [0, ep_size), E / ep_size experts per rank (exec/expert_placement.h says why).
//
// Unknown fields are errors (a misspelt "layer" must not silently mean "no layers"), and every
// message names the file and the field.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "exec/expert_load.h"
#include "exec/expert_placement.h"

namespace ember::exec {

// `where` names the document in errors (a path).
Expected<ExpertPlacement> ParseExpertPlacement(const std::string& text, const std::string& where);
Expected<ExpertPlacement> ReadExpertPlacementFile(const std::string& path);
// Every listed layer and the default; "num_layers" when known.
std::string ExpertPlacementToJson(const ExpertPlacement& placement);

struct ExpertLoadFile {
  ExpertLoad load;
  int64_t num_layers = 0;  // 0: the file did not say
};
Expected<ExpertLoadFile> ParseExpertLoad(const std::string& text, const std::string& where);
Expected<ExpertLoadFile> ReadExpertLoadFile(const std::string& path);
// `num_layers` 0 leaves the field out.
std::string ExpertLoadToJson(const ExpertLoad& load, int64_t num_layers);

// The JSON above written to `path` (replaced); IoError naming the path on failure.
Status WriteExpertPlacementFile(const std::string& path, const ExpertPlacement& placement);
Status WriteExpertLoadFile(const std::string& path, const ExpertLoad& load, int64_t num_layers);

}  // namespace ember::exec
