#include "media/muse_processor_config.h"

#include <charconv>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace ember::media {
namespace {

using nlohmann::json;

Status ReadJsonFile(const std::filesystem::path& path, json* out, bool* found) {
  *found = false;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return Status::Ok();
  std::ifstream in(path);
  if (!in) return IoError(fmt::format("cannot open {}", path.string()));
  *out = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded() || !out->is_object()) {
    return InvalidArgument(fmt::format("{} is not a JSON object", path.string()));
  }
  *found = true;
  return Status::Ok();
}

Status GetInt(const json& o, const char* key, const std::string& where, int64_t* out) {
  if (!o.contains(key) || o[key].is_null()) return Status::Ok();
  if (!o[key].is_number_integer() || o[key].get<int64_t>() <= 0) {
    return InvalidArgument(fmt::format("{}: \"{}\" must be a positive integer", where, key));
  }
  *out = o[key].get<int64_t>();
  return Status::Ok();
}

Status GetDouble(const json& o, const char* key, const std::string& where, double* out) {
  if (!o.contains(key) || o[key].is_null()) return Status::Ok();
  if (!o[key].is_number() || !(o[key].get<double>() > 0)) {
    return InvalidArgument(fmt::format("{}: \"{}\" must be a positive number", where, key));
  }
  *out = o[key].get<double>();
  return Status::Ok();
}

Status GetTriple(const json& o, const char* key, const std::string& where, std::array<float, 3>* out) {
  if (!o.contains(key) || o[key].is_null()) return Status::Ok();
  const json& v = o[key];
  if (v.is_number()) {
    out->fill(v.get<float>());
    return Status::Ok();
  }
  if (!v.is_array() || v.size() != 3 || !v[0].is_number() || !v[1].is_number() || !v[2].is_number()) {
    return InvalidArgument(fmt::format("{}: \"{}\" must be a number or a list of 3 numbers", where, key));
  }
  for (int i = 0; i < 3; ++i) (*out)[i] = v[i].get<float>();
  return Status::Ok();
}

Status CheckUnsupported(const json& o, const std::string& where) {
  for (const char* key : {"do_resize", "do_rescale", "do_normalize", "do_convert_rgb"}) {
    if (o.contains(key) && o[key].is_boolean() && !o[key].get<bool>()) {
      return Unimplemented(fmt::format("{}: \"{}\": false is not supported by ember's media processor", where, key));
    }
  }
  // PILImageResampling.LANCZOS is 1.
  if (o.contains("resample") && !o["resample"].is_null() && o["resample"] != 1) {
    return Unimplemented(fmt::format("{}: resample {} is not supported (only LANCZOS = 1)", where,
                                     o["resample"].dump()));
  }
  if (o.contains("do_sample_frames") && o["do_sample_frames"].is_boolean() && !o["do_sample_frames"].get<bool>()) {
    return Unimplemented(fmt::format("{}: \"do_sample_frames\": false is not supported", where));
  }
  return Status::Ok();
}

Status ApplyImage(const json& o, const std::string& where, MuseProcessorConfig* c) {
  EMBER_RETURN_IF_ERROR(CheckUnsupported(o, where));
  EMBER_RETURN_IF_ERROR(GetInt(o, "patch_size", where, &c->patch_size));
  EMBER_RETURN_IF_ERROR(GetInt(o, "temporal_patch_size", where, &c->temporal_patch_size));
  EMBER_RETURN_IF_ERROR(GetInt(o, "merge_size", where, &c->merge_size));
  EMBER_RETURN_IF_ERROR(GetInt(o, "max_image_tokens", where, &c->max_image_tokens));
  EMBER_RETURN_IF_ERROR(GetTriple(o, "image_mean", where, &c->image_mean));
  EMBER_RETURN_IF_ERROR(GetTriple(o, "image_std", where, &c->image_std));
  return GetDouble(o, "rescale_factor", where, &c->rescale_factor);
}

Status ApplyVideo(const json& o, const std::string& where, MuseProcessorConfig* c) {
  EMBER_RETURN_IF_ERROR(CheckUnsupported(o, where));
  EMBER_RETURN_IF_ERROR(GetInt(o, "patch_size", where, &c->video_patch_size));
  EMBER_RETURN_IF_ERROR(GetInt(o, "temporal_patch_size", where, &c->video_temporal_patch_size));
  EMBER_RETURN_IF_ERROR(GetInt(o, "merge_size", where, &c->video_merge_size));
  EMBER_RETURN_IF_ERROR(GetInt(o, "max_video_frame_tokens", where, &c->max_video_frame_tokens));
  EMBER_RETURN_IF_ERROR(GetInt(o, "num_frames", where, &c->num_frames));
  EMBER_RETURN_IF_ERROR(GetDouble(o, "fps", where, &c->fps));
  EMBER_RETURN_IF_ERROR(GetTriple(o, "image_mean", where, &c->video_mean));
  EMBER_RETURN_IF_ERROR(GetTriple(o, "image_std", where, &c->video_std));
  EMBER_RETURN_IF_ERROR(GetDouble(o, "rescale_factor", where, &c->video_rescale_factor));
  if (o.contains("frame_timestamp_format") && !o["frame_timestamp_format"].is_null()) {
    if (!o["frame_timestamp_format"].is_string()) {
      return InvalidArgument(fmt::format("{}: \"frame_timestamp_format\" must be a string", where));
    }
    c->frame_timestamp_format = o["frame_timestamp_format"].get<std::string>();
    auto probe = FormatTimestamp(c->frame_timestamp_format, 0.5f);
    if (!probe.ok()) return Unimplemented(fmt::format("{}: {}", where, probe.status().message()));
  }
  return Status::Ok();
}

Status ApplyAudio(const json& o, const std::string& where, MuseProcessorConfig* c) {
  EMBER_RETURN_IF_ERROR(GetInt(o, "sampling_rate", where, &c->sampling_rate));
  EMBER_RETURN_IF_ERROR(GetInt(o, "samples_per_token", where, &c->samples_per_token));
  if (o.contains("feature_size") && o["feature_size"] != 1) {
    return Unimplemented(fmt::format("{}: feature_size {} (only mono, 1)", where, o["feature_size"].dump()));
  }
  return Status::Ok();
}

}  // namespace

Expected<MuseProcessorConfig> LoadMuseProcessorConfig(const std::string& dir) {
  MuseProcessorConfig c;
  const std::filesystem::path root(dir);
  json j;
  bool found = false;
  EMBER_RETURN_IF_ERROR(ReadJsonFile(root / "preprocessor_config.json", &j, &found));
  if (found) {
    if (j.contains("feature_extractor_type") || j.contains("samples_per_token")) {
      EMBER_RETURN_IF_ERROR(ApplyAudio(j, "preprocessor_config.json", &c));
    } else {
      EMBER_RETURN_IF_ERROR(ApplyImage(j, "preprocessor_config.json", &c));
      // A lone preprocessor_config.json describes the video processor's shared fields too.
      EMBER_RETURN_IF_ERROR(GetInt(j, "patch_size", "preprocessor_config.json", &c.video_patch_size));
      EMBER_RETURN_IF_ERROR(GetInt(j, "temporal_patch_size", "preprocessor_config.json",
                                   &c.video_temporal_patch_size));
      EMBER_RETURN_IF_ERROR(GetInt(j, "merge_size", "preprocessor_config.json", &c.video_merge_size));
    }
  }
  EMBER_RETURN_IF_ERROR(ReadJsonFile(root / "video_preprocessor_config.json", &j, &found));
  if (found) EMBER_RETURN_IF_ERROR(ApplyVideo(j, "video_preprocessor_config.json", &c));
  EMBER_RETURN_IF_ERROR(ReadJsonFile(root / "processor_config.json", &j, &found));
  if (found) {
    if (j.contains("image_processor") && j["image_processor"].is_object()) {
      EMBER_RETURN_IF_ERROR(ApplyImage(j["image_processor"], "processor_config.json: image_processor", &c));
    }
    if (j.contains("video_processor") && j["video_processor"].is_object()) {
      EMBER_RETURN_IF_ERROR(ApplyVideo(j["video_processor"], "processor_config.json: video_processor", &c));
    }
    if (j.contains("feature_extractor") && j["feature_extractor"].is_object()) {
      EMBER_RETURN_IF_ERROR(ApplyAudio(j["feature_extractor"], "processor_config.json: feature_extractor", &c));
    }
  }
  if (c.temporal_patch_size > 16 || c.video_temporal_patch_size > 16 || c.patch_size > 1024 ||
      c.video_patch_size > 1024 || c.merge_size > 64 || c.video_merge_size > 64) {
    return InvalidArgument("processor config: patch_size, merge_size or temporal_patch_size is implausibly large");
  }
  return c;
}

std::string ProcessorConfigKey(const MuseProcessorConfig& c) {
  return fmt::format("p{}t{}m{}n{}mean{},{},{}std{},{},{}r{:a}|vp{}t{}m{}n{}f{}fps{:a}mean{},{},{}std{},{},{}r{:a}|{}",
                     c.patch_size, c.temporal_patch_size, c.merge_size, c.max_image_tokens, c.image_mean[0],
                     c.image_mean[1], c.image_mean[2], c.image_std[0], c.image_std[1], c.image_std[2],
                     c.rescale_factor, c.video_patch_size, c.video_temporal_patch_size, c.video_merge_size,
                     c.max_video_frame_tokens, c.num_frames, c.fps, c.video_mean[0], c.video_mean[1],
                     c.video_mean[2], c.video_std[0], c.video_std[1], c.video_std[2], c.video_rescale_factor,
                     c.sampling_rate);
}

Expected<std::string> FormatTimestamp(const std::string& format, float timestamp) {
  std::string out;
  const double value = static_cast<double>(timestamp);
  for (size_t i = 0; i < format.size();) {
    const char ch = format[i];
    if (ch == '{' && i + 1 < format.size() && format[i + 1] == '{') {
      out += '{';
      i += 2;
    } else if (ch == '}' && i + 1 < format.size() && format[i + 1] == '}') {
      out += '}';
      i += 2;
    } else if (ch == '{') {
      const size_t close = format.find('}', i);
      if (close == std::string::npos) return InvalidArgument("frame_timestamp_format has an unclosed '{'");
      const std::string field = format.substr(i + 1, close - i - 1);
      if (field == "timestamp") {
        // Python repr of a float: shortest round-trip digits, always with a '.' or exponent.
        char buf[64];
        auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
        std::string s(buf, end);
        if (s.find_first_of(".en") == std::string::npos) s += ".0";
        out += s;
      } else if (field.rfind("timestamp:.", 0) == 0 && field.size() >= 13 && field.back() == 'f') {
        const std::string digits = field.substr(11, field.size() - 12);
        if (digits.empty() || digits.size() > 2 || digits.find_first_not_of("0123456789") != std::string::npos) {
          return InvalidArgument(fmt::format("frame_timestamp_format field {{{}}} is not supported", field));
        }
        // printf rounds the exact binary value, ties to even: what Python's format does.
        char buf[400];
        std::snprintf(buf, sizeof(buf), "%.*f", std::stoi(digits), value);
        out += buf;
      } else {
        return InvalidArgument(fmt::format("frame_timestamp_format field {{{}}} is not supported (use "
                                           "{{timestamp}} or {{timestamp:.Nf}})", field));
      }
      i = close + 1;
    } else if (ch == '}') {
      return InvalidArgument("frame_timestamp_format has a single '}'");
    } else {
      out += ch;
      ++i;
    }
  }
  return out;
}

}  // namespace ember::media
