// Where a request's image, video or audio bytes come from: a data: URL (base64), a local file
// under --allowed-local-media-path (file:// URLs, as vLLM), or, refused, a remote URL. Every
// path is bounded: the encoded size is checked before anything is decoded or read.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "server/protocol/api_error.h"

namespace ember::server {

struct MediaAccess {
  // Local files may be read only under this directory (resolved, symlinks followed); empty: none.
  std::string allowed_local_media_path;
  int64_t max_media_bytes = int64_t{16} << 20;  // one item's encoded bytes at most
};

// The bytes a media URL names. `field` is where the URL was (for the error), e.g.
// "messages[1].content[0].image_url.url".
std::variant<std::vector<uint8_t>, ApiError> FetchMedia(const std::string& url, const MediaAccess& access,
                                                        const std::string& field);

// Strict base64 (RFC 4648 with padding optional; whitespace refused): nullopt-like false on any
// other character. Decodes at most max_bytes; more is an error too.
bool DecodeBase64(std::string_view text, int64_t max_bytes, std::vector<uint8_t>* out);

}  // namespace ember::server
