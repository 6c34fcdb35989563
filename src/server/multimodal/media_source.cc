#include "server/multimodal/media_source.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "server/protocol/safe_text.h"

namespace ember::server {
namespace {

namespace fs = std::filesystem;

constexpr std::array<int8_t, 256> kBase64Values = [] {
  std::array<int8_t, 256> v{};
  v.fill(-1);
  const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int i = 0; i < 64; ++i) v[static_cast<uint8_t>(alphabet[i])] = static_cast<int8_t>(i);
  return v;
}();

std::variant<std::vector<uint8_t>, ApiError> FromDataUrl(std::string_view url, const MediaAccess& access,
                                                         const std::string& field) {
  // data:[<media type>][;base64],<data>
  const size_t comma = url.find(',');
  if (comma == std::string_view::npos) {
    return MediaRefusal(field, "a data: URL needs a ',' before its data");
  }
  const std::string_view header = url.substr(5, comma - 5);
  if (header.size() < 7 || header.substr(header.size() - 7) != ";base64") {
    return MediaRefusal(field, "only base64 data: URLs are accepted (data:<type>;base64,<data>)");
  }
  return DecodeBase64Media(url.substr(comma + 1), access, field, "the data: URL's data");
}

std::variant<std::vector<uint8_t>, ApiError> FromLocalFile(std::string_view url, const MediaAccess& access,
                                                           const std::string& field) {
  if (access.allowed_local_media_path.empty()) {
    return MediaRefusal(field, "this server reads no local files; start it with --allowed-local-media-path DIR to allow "
                         "file:// URLs under DIR, or send a data: URL");
  }
  std::string_view path = url.substr(7);  // file://
  if (path.empty() || path.front() != '/') {
    return MediaRefusal(field, "a file:// URL needs an absolute path (file:///dir/name)");
  }
  std::error_code ec;
  // Resolved with symlinks followed, so a link inside the allowed directory to a file outside it
  // is outside, as is any "..".
  const fs::path resolved = fs::canonical(fs::path(path), ec);
  std::error_code root_ec;
  const fs::path root = fs::canonical(fs::path(access.allowed_local_media_path), root_ec);
  auto outside = [&] {
    return MediaRefusal(field, fmt::format("'{}' is not a readable file under the allowed local media path",
                                     SafeText(std::string(path))));
  };
  if (ec || root_ec || resolved.empty()) return outside();
  const auto [root_end, _] = std::mismatch(root.begin(), root.end(), resolved.begin(), resolved.end());
  if (root_end != root.end() || !fs::is_regular_file(resolved, ec) || ec) return outside();
  const auto size = fs::file_size(resolved, ec);
  if (ec) return outside();
  if (static_cast<int64_t>(size) > access.max_media_bytes) return MediaTooLarge(field, access.max_media_bytes);
  std::ifstream in(resolved, std::ios::binary);
  std::vector<uint8_t> bytes(size);
  if (!in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size))) return outside();
  if (bytes.empty()) return MediaRefusal(field, "the file is empty");
  return bytes;
}

}  // namespace

// Every refusal names the content part in its message; the request field is "messages".
ApiError MediaRefusal(const std::string& field, const std::string& why) {
  return BadRequest(fmt::format("{}: {}", field, why), "messages");
}

ApiError MediaTooLarge(const std::string& field, int64_t max_bytes) {
  return MediaRefusal(field, fmt::format("the media is larger than the server's limit of {} bytes per item "
                                         "(--max-media-bytes)",
                                         max_bytes));
}

std::variant<std::vector<uint8_t>, ApiError> DecodeBase64Media(std::string_view data, const MediaAccess& access,
                                                               const std::string& field, std::string_view what) {
  // Refused before decoding: base64 is 4 characters per 3 bytes.
  if (static_cast<int64_t>(data.size()) / 4 * 3 > access.max_media_bytes + 3) return MediaTooLarge(field, access.max_media_bytes);
  std::vector<uint8_t> bytes;
  if (!DecodeBase64(data, access.max_media_bytes, &bytes)) return MediaRefusal(field, fmt::format("{} is not valid base64", what));
  if (bytes.empty()) return MediaRefusal(field, fmt::format("{} is empty", what));
  return bytes;
}

bool DecodeBase64(std::string_view text, int64_t max_bytes, std::vector<uint8_t>* out) {
  out->clear();
  size_t padding = 0;
  while (padding < 2 && !text.empty() && text.back() == '=') {
    text.remove_suffix(1);
    ++padding;
  }
  if ((padding > 0 && (text.size() + padding) % 4 != 0) || text.size() % 4 == 1) return false;
  const int64_t decoded = static_cast<int64_t>(text.size() / 4 * 3 + (text.size() % 4 == 0 ? 0 : text.size() % 4 - 1));
  if (decoded > max_bytes) return false;
  out->reserve(static_cast<size_t>(decoded));
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    const int8_t v = kBase64Values[static_cast<uint8_t>(c)];
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<uint8_t>(acc >> bits));
      acc &= (1u << bits) - 1;
    }
  }
  return true;
}

std::variant<std::vector<uint8_t>, ApiError> FetchMedia(const std::string& url, const MediaAccess& access,
                                                        const std::string& field) {
  if (url.rfind("data:", 0) == 0) return FromDataUrl(url, access, field);
  if (url.rfind("file://", 0) == 0) return FromLocalFile(url, access, field);
  if (url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0) {
    return FetchRemoteMedia(url, access.remote, access.max_media_bytes, field);
  }
  return MediaRefusal(field, "expected a data: URL (or a file:// or http(s) URL where the server allows them)");
}

}  // namespace ember::server
