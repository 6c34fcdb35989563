// Request bytes made safe to put in an error message or a log line. A message that quotes a
// client's text verbatim can carry invalid UTF-8 (which makes the JSON writer throw), terminal
// control sequences (into the log) or megabytes (a 1 MB model name echoed back), so every piece
// of request text that an error message names goes through SafeText first.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ember::server {

// `raw` with valid UTF-8 kept and every other byte or control character escaped (\xNN; \n and \t
// as two characters; C1 controls as \u00NN), cut to about `max_bytes` of output with "..." when
// longer.
std::string SafeText(std::string_view raw, size_t max_bytes = 64);

}  // namespace ember::server
