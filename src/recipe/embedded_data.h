// The recipe's data files (rules.json, hardware.json, formats.json in this folder), compiled into
// the binary by cmake/embed_text.cmake so that `ember recipe` needs no installed files.
#pragma once

#include <string_view>

namespace ember::recipe {

std::string_view EmbeddedRulesJson();
std::string_view EmbeddedHardwareJson();
std::string_view EmbeddedFormatsJson();

}  // namespace ember::recipe
