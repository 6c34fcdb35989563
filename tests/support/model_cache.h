// Where the fetched real models are (scripts/fetch_models.py): $EMBER_MODEL_CACHE, else
// ~/.cache/ember/models.
#pragma once

#include <cstdlib>
#include <string>

namespace ember::test {

inline std::string ModelCacheDir() {
  const char* cache = std::getenv("EMBER_MODEL_CACHE");
  const char* home = std::getenv("HOME");
  return cache && *cache ? cache : std::string(home ? home : "/") + "/.cache/ember/models";
}

}  // namespace ember::test
