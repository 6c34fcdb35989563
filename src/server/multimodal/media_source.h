// Where a request's image, video or audio bytes come from: a data: URL (base64), a local file
// under --allowed-local-media-path (file:// URLs, as vLLM), or an http(s) URL on a host of
// --allowed-media-domains (remote_media.h; refused without it). Every path is bounded: the
// encoded size is checked before anything is decoded or read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "server/multimodal/remote_media.h"
#include "server/protocol/api_error.h"

namespace ember::server {

struct MediaAccess {
  // Local files may be read only under this directory (resolved, symlinks followed); empty: none.
  std::string allowed_local_media_path;
  int64_t max_media_bytes = int64_t{16} << 20;  // one item's encoded bytes at most
  RemoteMediaPolicy remote;                      // http(s) URLs: none unless hosts are allowed
};

// A media part refused: a 400 whose message starts with `field` (the content part) and whose
// param is "messages", as every media refusal.
ApiError MediaRefusal(const std::string& field, const std::string& why);
// The part is larger than --max-media-bytes.
ApiError MediaTooLarge(const std::string& field, int64_t max_bytes);

// The bytes a media URL names. `field` is where the URL was (for the error), e.g.
// "messages[1].content[0].image_url.url".
std::variant<std::vector<uint8_t>, ApiError> FetchMedia(const std::string& url, const MediaAccess& access,
                                                        const std::string& field);

// Base64 media data (a data: URL's payload, input_audio.data): the size is checked before
// decoding, and invalid or empty data is refused; `what` names the data in the message.
std::variant<std::vector<uint8_t>, ApiError> DecodeBase64Media(std::string_view data, const MediaAccess& access,
                                                               const std::string& field, std::string_view what);

// Strict base64 (RFC 4648, padding optional, no whitespace): false on any other character, and
// when the data holds more than max_bytes.
bool DecodeBase64(std::string_view text, int64_t max_bytes, std::vector<uint8_t>* out);

}  // namespace ember::server
