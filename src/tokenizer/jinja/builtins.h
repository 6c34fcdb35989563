// Names of the filters and tests templates may use.
//
// jinja2 rejects an unknown filter or test name when it compiles a template, so the parser does
// too. Names jinja2 knows but this engine does not implement parse fine and fail only if a render
// reaches them, so a template that merely mentions one in an unused branch still works.
#pragma once

#include <string_view>

namespace ember::jinja {

// A filter of jinja2's default environment, or HF's tojson override.
bool IsJinjaFilterName(std::string_view name);
// A test of jinja2's default environment.
bool IsJinjaTestName(std::string_view name);

}  // namespace ember::jinja
