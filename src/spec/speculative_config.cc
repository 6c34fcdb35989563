#include "spec/speculative_config.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "formats/json_fields.h"

namespace ember::spec {
namespace {

constexpr const char* kWhere = "--speculative-config";

Status OutOfRange(const char* field, double value, const std::string& allowed) {
  return InvalidArgument(fmt::format("{}: \"{}\" is {}: it must be {}", kWhere, field, value, allowed));
}

// Reads an optional integer field into *out (left alone when absent), checked against [lo, hi].
Status IntField(JsonFields& fields, const char* key, int64_t lo, int64_t hi, int32_t* out) {
  if (!fields.Has(key)) return Status::Ok();
  int64_t value = 0;
  if (Status s = fields.Int(key, &value); !s.ok()) return s;
  if (value < lo || value > hi) return OutOfRange(key, static_cast<double>(value), fmt::format("in [{}, {}]", lo, hi));
  *out = static_cast<int32_t>(value);
  return Status::Ok();
}

Status FloatField(JsonFields& fields, const char* key, double lo, double hi, float* out) {
  if (!fields.Has(key)) return Status::Ok();
  double value = 0;
  if (Status s = fields.Double(key, &value); !s.ok()) return s;
  if (!(value >= lo && value <= hi)) return OutOfRange(key, value, fmt::format("in [{}, {}]", lo, hi));
  *out = static_cast<float>(value);
  return Status::Ok();
}

// vLLM's dspark fields. The block-size bound on num_speculative_tokens needs the drafter's
// config, so LoadDSparkProposer checks it.
Status ParseDSparkFields(JsonFields& fields, SpeculativeConfig& config) {
  if (Status s = fields.String("model", &config.model); !s.ok()) {
    return InvalidArgument(fmt::format("{}: method dspark needs \"model\": the directory of a DSpark drafter trained "
                                       "for the target ({})", kWhere, s.message()));
  }
  if (config.model.empty()) return InvalidArgument(fmt::format("{}: \"model\" is empty", kWhere));
  if (fields.Has("draft_sample_method")) {
    std::string method;
    if (Status s = fields.String("draft_sample_method", &method); !s.ok()) return s;
    if (method == "greedy") {
      config.draft_sample_method = DraftSampleMethod::kGreedy;
    } else if (method == "probabilistic") {
      config.draft_sample_method = DraftSampleMethod::kProbabilistic;
    } else {
      return InvalidArgument(fmt::format("{}: \"draft_sample_method\" is \"{}\": it must be greedy or probabilistic",
                                         kWhere, method));
    }
  }
  if (fields.Has("enable_adaptive_verification")) {
    bool adaptive = false;
    if (Status s = fields.Bool("enable_adaptive_verification", &adaptive); !s.ok()) return s;
    if (fields.Has("adaptive") && adaptive != config.adaptive) {
      return InvalidArgument(fmt::format("{}: \"adaptive\" and \"enable_adaptive_verification\" disagree; give one",
                                         kWhere));
    }
    config.adaptive = adaptive;
  }
  if (fields.Has("rejection_sample_method")) {
    std::string rule;
    if (Status s = fields.String("rejection_sample_method", &rule); !s.ok()) return s;
    if (rule != "standard") {
      return InvalidArgument(fmt::format(
          "{}: \"rejection_sample_method\" is \"{}\": ember verifies with the standard lossless rule only (vLLM's "
          "\"block\" verification is not described publicly); use \"standard\" or leave it out", kWhere, rule));
    }
  }
  if (Status s = IntField(fields, "draft_vocab_size", 0, int64_t{1} << 30, &config.draft_vocab_size); !s.ok()) return s;
  if (fields.Has("quantization")) {
    if (Status s = fields.String("quantization", &config.quantization); !s.ok()) return s;
    if (config.quantization != "q8_0" && config.quantization != "none") {
      return InvalidArgument(fmt::format("{}: \"quantization\" is \"{}\": a DSpark drafter's matmuls run in \"q8_0\" "
                                         "(the default) or, with \"none\", on its own weights as given",
                                         kWhere, config.quantization));
    }
  }
  return FloatField(fields, "draft_confidence_threshold", 0.0, 1.0, &config.draft_confidence_threshold);
}

}  // namespace

std::string_view MethodName(Method method) {
  switch (method) {
    case Method::kNgram: return "ngram";
    case Method::kSuffix: return "suffix";
    case Method::kDraftModel: return "draft_model";
    case Method::kDSpark: return "dspark";
  }
  return "?";
}

Expected<SpeculativeConfig> ParseSpeculativeConfig(std::string_view json) {
  nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return InvalidArgument(fmt::format(
        "{} is not a JSON object: pass e.g. '{{\"method\":\"ngram\",\"num_speculative_tokens\":5}}'", kWhere));
  }
  JsonFields fields(doc, kWhere);
  SpeculativeConfig config;
  std::string method;
  if (Status s = fields.String("method", &method); !s.ok()) return s;
  if (method == "ngram") {
    config.method = Method::kNgram;
  } else if (method == "suffix") {
    config.method = Method::kSuffix;
  } else if (method == "draft_model") {
    config.method = Method::kDraftModel;
  } else if (method == "dspark") {
    config.method = Method::kDSpark;
  } else {
    return InvalidArgument(fmt::format("{}: \"method\" is \"{}\": it must be one of ngram, suffix, draft_model, "
                                       "dspark", kWhere, method));
  }
  if (!fields.Has("num_speculative_tokens")) {
    return InvalidArgument(fmt::format("{}: \"num_speculative_tokens\" is missing: say how many tokens to draft per "
                                       "step (1 to {})", kWhere, kMaxSpeculativeTokens));
  }
  if (Status s = IntField(fields, "num_speculative_tokens", 1, kMaxSpeculativeTokens, &config.num_speculative_tokens);
      !s.ok()) {
    return s;
  }
  if (fields.Has("adaptive")) {
    if (Status s = fields.Bool("adaptive", &config.adaptive); !s.ok()) return s;
  }
  // Fields of other methods are rejected as unknown: a suffix option on an ngram config is a
  // mistake worth hearing about.
  if (config.method == Method::kNgram) {
    if (Status s = IntField(fields, "prompt_lookup_min", 1, 64, &config.prompt_lookup_min); !s.ok()) return s;
    if (Status s = IntField(fields, "prompt_lookup_max", 1, 64, &config.prompt_lookup_max); !s.ok()) return s;
    if (fields.Has("prompt_lookup_min") && !fields.Has("prompt_lookup_max")) {
      config.prompt_lookup_max = std::max(config.prompt_lookup_max, config.prompt_lookup_min);
    }
    if (config.prompt_lookup_min > config.prompt_lookup_max) {
      return InvalidArgument(fmt::format("{}: \"prompt_lookup_min\" ({}) is above \"prompt_lookup_max\" ({})", kWhere,
                                         config.prompt_lookup_min, config.prompt_lookup_max));
    }
  } else if (config.method == Method::kSuffix) {
    if (Status s = IntField(fields, "suffix_decoding_max_tree_depth", 1, 1024, &config.suffix_max_tree_depth); !s.ok()) {
      return s;
    }
    if (Status s = IntField(fields, "suffix_decoding_max_cached_requests", 0, 1000000,
                            &config.suffix_max_cached_requests);
        !s.ok()) {
      return s;
    }
    if (Status s = FloatField(fields, "suffix_decoding_max_spec_factor", 0.0, 64.0, &config.suffix_max_spec_factor);
        !s.ok()) {
      return s;
    }
    if (Status s = FloatField(fields, "suffix_decoding_min_token_prob", 0.0, 1.0, &config.suffix_min_token_prob);
        !s.ok()) {
      return s;
    }
  } else if (config.method == Method::kDraftModel) {
    if (Status s = fields.String("model", &config.model); !s.ok()) {
      return InvalidArgument(fmt::format("{}: method draft_model needs \"model\": the path of a model file with the "
                                         "target's vocabulary ({})", kWhere, s.message()));
    }
    if (config.model.empty()) return InvalidArgument(fmt::format("{}: \"model\" is empty", kWhere));
  } else {
    if (Status s = ParseDSparkFields(fields, config); !s.ok()) return s;
  }
  if (Status s = fields.RejectUnknown(); !s.ok()) return s;
  return config;
}

}  // namespace ember::spec
