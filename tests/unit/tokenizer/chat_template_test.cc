// Chat templates and the Jinja engine under them.
//
// ChatTemplateFixtureTest renders every case of testdata/chat_templates.json (made by
// scripts/make_chat_template_fixtures.py through transformers' apply_chat_template, i.e. Python
// jinja2) and requires byte-identical output, or a failure where Python failed. The engine tests
// below pin individual constructs, whitespace control and error reporting.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "support/source_dir.h"
#include "tokenizer/jinja/template.h"

namespace ember {
namespace {

using nlohmann::ordered_json;

const std::string kTestData = std::string(EMBER_SOURCE_DIR) + "/tests/unit/tokenizer/testdata/";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const ordered_json& Fixtures() {
  static const ordered_json fixtures = ordered_json::parse(ReadFile(kTestData + "chat_templates.json"));
  return fixtures;
}

std::tm FixtureTime() {
  const auto& now = Fixtures()["now"];
  std::tm tm{};
  tm.tm_year = now[0].get<int>() - 1900;
  tm.tm_mon = now[1].get<int>() - 1;
  tm.tm_mday = now[2].get<int>();
  tm.tm_hour = now[3].get<int>();
  tm.tm_min = now[4].get<int>();
  tm.tm_sec = now[5].get<int>();
  return tm;
}

// ---- Byte-identical rendering against Python jinja2 -------------------------------------------

struct FixtureCase {
  size_t index;
  std::string name;
};
void PrintTo(const FixtureCase& c, std::ostream* os) { *os << c.name; }

std::vector<FixtureCase> AllFixtureCases() {
  std::vector<FixtureCase> cases;
  const auto& all = Fixtures()["cases"];
  for (size_t i = 0; i < all.size(); ++i) {
    cases.push_back({i, all[i]["template"].get<std::string>() + "_" + all[i]["case"].get<std::string>()});
  }
  return cases;
}

class ChatTemplateFixtureTest : public ::testing::TestWithParam<FixtureCase> {};

TEST_P(ChatTemplateFixtureTest, RendersLikeJinja2) {
  const ordered_json& fixture = Fixtures()["cases"][GetParam().index];
  const std::string file = Fixtures()["templates"][fixture["template"].get<std::string>()];
  auto tmpl = ChatTemplate::Parse(ReadFile(kTestData + "templates/" + file));
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();

  const ordered_json& in = fixture["inputs"];
  ChatTemplateInputs inputs;
  inputs.messages = in["messages"];
  inputs.tools = in["tools"];
  inputs.add_generation_prompt = in["add_generation_prompt"].get<bool>();
  inputs.continue_final_message = in.value("continue_final_message", false);
  inputs.bos_token = in["bos_token"].get<std::string>();
  inputs.eos_token = in["eos_token"].get<std::string>();
  inputs.extra = in["extra"];
  inputs.now = FixtureTime();
  auto rendered = tmpl->Render(inputs);

  if (fixture["error"].is_null()) {
    ASSERT_TRUE(rendered.ok()) << rendered.status().ToString();
    EXPECT_EQ(*rendered, fixture["expected"].get<std::string>());
    return;
  }
  ASSERT_FALSE(rendered.ok()) << "jinja2 raised " << fixture["error"]["type"] << ": "
                              << fixture["error"]["message"] << "\nbut ember rendered:\n" << *rendered;
  if (fixture["error"]["type"] == "TemplateError") {
    // raise_exception(): the template's own message must reach the caller.
    EXPECT_NE(rendered.status().message().find(fixture["error"]["message"].get<std::string>()), std::string::npos)
        << rendered.status().ToString();
  }
  const std::string message = fixture["error"]["message"];
  if (fixture["error"]["type"] == "ValueError" && message.rfind("continue_final_message", 0) == 0) {
    // transformers' own first sentence (it goes on to quote the render).
    const std::string sentence = message.substr(0, message.find('!') + 1);
    EXPECT_NE(rendered.status().message().find(sentence), std::string::npos) << rendered.status().ToString();
  }
}

INSTANTIATE_TEST_SUITE_P(Jinja2, ChatTemplateFixtureTest, ::testing::ValuesIn(AllFixtureCases()),
                         [](const ::testing::TestParamInfo<FixtureCase>& info) { return info.param.name; });

TEST(ChatTemplateFixtures, CoverEveryTemplate) {
  std::map<std::string, int> rendered;
  for (const auto& c : Fixtures()["cases"]) {
    if (c["error"].is_null()) ++rendered[c["template"].get<std::string>()];
  }
  for (const char* name : {"smollm2", "gemma3", "qwen3", "muse_spark_xhigh", "engine_features"}) {
    EXPECT_GE(rendered[name], 20) << name;
  }
}

// Templates that loop over a message's content get content parts as a list, the others the text
// parts joined (vLLM's "openai" and "string" content formats); decided from the syntax tree.
TEST(ChatTemplateContentParts, DetectedFromLoopsOverContent) {
  auto wants = [](const std::string& source) {
    auto tmpl = ChatTemplate::Parse(source);
    EXPECT_TRUE(tmpl.ok()) << tmpl.status().ToString();
    return tmpl.ok() && tmpl->wants_content_parts();
  };
  auto file = [&](const char* name) { return wants(ReadFile(kTestData + "templates/" + name)); };
  EXPECT_TRUE(file("gemma3.jinja"));  // for item in message['content'], message from loop_messages = messages[1:]
  EXPECT_FALSE(file("smollm2.jinja"));
  EXPECT_FALSE(file("qwen3.jinja"));
  EXPECT_TRUE(file("muse_spark_xhigh.jinja"));  // a macro's `for part in content`
  EXPECT_TRUE(wants("{% for m in messages %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endfor %}"));
  EXPECT_TRUE(wants("{% set ms = messages | reverse %}{% set ms2 = ms[1:] %}{% for m in ms2 %}"
                    "{% if m.role == 'user' %}{% for p in m['content'] | selectattr('type') %}x{% endfor %}"
                    "{% endif %}{% endfor %}"));
  EXPECT_FALSE(wants("{% for m in messages %}{{ m['content'] }}{% endfor %}"));
  EXPECT_FALSE(wants("{% for m in messages %}{% for c in m['tool_calls'] %}{% endfor %}{% endfor %}"));
  // A loop over the content of something that is not a message does not count.
  EXPECT_FALSE(wants("{% for t in tools %}{% for p in t['content'] %}{% endfor %}{% endfor %}"));
  EXPECT_FALSE(wants("{{ messages[0]['content'] }}"));
}

// ---- Engine constructs -----------------------------------------------------------------------

// Renders `source` with `vars` (a JSON object of template variables).
Expected<std::string> Render(const std::string& source, const ordered_json& vars = ordered_json::object()) {
  auto tmpl = jinja::Template::Parse(source);
  if (!tmpl.ok()) return tmpl.status();
  std::vector<std::pair<std::string, jinja::Value>> variables;
  for (const auto& [k, v] : vars.items()) variables.emplace_back(k, jinja::FromJson(v));
  return tmpl->Render(variables);
}

std::string R(const std::string& source, const ordered_json& vars = ordered_json::object()) {
  auto out = Render(source, vars);
  return out.ok() ? *out : "ERROR: " + out.status().ToString();
}

TEST(JinjaEngine, Literals) {
  EXPECT_EQ(R("{{ 1 }} {{ 1.0 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e-5 }} {{ 10 / 4 }} {{ 7 // 2 }} {{ -7 % 3 }}"),
            "1 1.0 0.30000000000000004 1e+16 1e-05 2.5 3 2");
  EXPECT_EQ(R("{{ 2 ** 3 ** 2 }} {{ -1|abs }} {{ 'a' ~ 1 ~ none ~ true }} {{ 'ab' 'cd' }}"), "64 1 a1NoneTrue abcd");
  EXPECT_EQ(R("{{ [1, 'a', none, {'k': \"it's\"}] }} {{ (1,) }} {{ () }}"), "[1, 'a', None, {'k': \"it's\"}] (1,) ()");
  EXPECT_EQ(R(R"({{ 'a\tb\u00e9\x41\n' }})"), "a\tb\xc3\xa9" "A\n");
}

TEST(JinjaEngine, Operators) {
  EXPECT_EQ(R("{{ true and 'y' }} {{ 0 or 'z' }} {{ not none }} {{ 1 < 2 < 3 }} {{ 'b' in 'abc' }} {{ 3 not in [3] }}"),
            "y z True True True False");
  EXPECT_EQ(R("{{ 'a' * 3 }} {{ [1] + [2] }} {{ true + 1 }} {{ 1 == 1.0 }} {{ (1, 2) == [1, 2] }}"),
            "aaa [1, 2] 2 True False");
  EXPECT_EQ(R("{{ 'x' if false else 'y' }}|{{ 'x' if false }}|"), "y||");
}

TEST(JinjaEngine, WhitespaceControlMatchesHfSettings) {
  // trim_blocks drops the newline after a block tag; lstrip_blocks drops the indentation before it.
  EXPECT_EQ(R("a\n  {% if true %}\n  b\n  {% endif %}\n  c\n"), "a\n  b\n  c");
  EXPECT_EQ(R("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(R("x {{- ' y ' -}} z"), "x y z");
  EXPECT_EQ(R("  {%+ if true %}k{% endif +%}\nn"), "  k\nn");
  EXPECT_EQ(R("a\n{# comment #}\nb\n   {#- c -#}   \nd"), "a\nbd");
  EXPECT_EQ(R("{{ 'x' }}  {% if true %}y{% endif %}"), "x  y");  // not at line start: no lstrip
  EXPECT_EQ(R("l1\r\nl2\rl3\n\n"), "l1\nl2\nl3\n");              // newlines normalised, one trailing dropped
  EXPECT_EQ(R("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
}

TEST(JinjaEngine, ForLoops) {
  EXPECT_EQ(R("{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}"
              "{{ loop.length }};{% endfor %}",
              {{"xs", {"a", "b"}}}),
            "102TrueFalse2;211FalseTrue2;");
  EXPECT_EQ(R("{% for x in [1, 2, 3] if x != 2 %}{{ x }}/{{ loop.length }} {% else %}none{% endfor %}"), "1/2 3/2 ");
  EXPECT_EQ(R("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(R("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }},{% endfor %}"), "a=1,b=2,");
  EXPECT_EQ(R("{% for i in range(6) %}{% if i == 4 %}{% break %}{% elif i is odd %}{% continue %}{% endif %}{{ i }}"
              "{% endfor %}"),
            "02");
  EXPECT_EQ(R("{% for x in 'hé' %}[{{ x }}]{% endfor %}{% for x in undefined_thing %}never{% endfor %}"), "[h][é]");
  EXPECT_EQ(R("{% for m in ms %}{{ loop.previtem | default('-') }}{{ loop.nextitem | default('-') }}{% endfor %}",
              {{"ms", {1, 2}}}),
            "-21-");
}

TEST(JinjaEngine, SetScopingAndNamespace) {
  // Assignments in a loop body stay in that iteration; namespaces carry state out.
  EXPECT_EQ(R("{% set x = 1 %}{% for i in [1] %}{{ x }}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}"), "121");
  EXPECT_EQ(R("{% if true %}{% set y = 5 %}{% endif %}{{ y }}"), "5");
  EXPECT_EQ(R("{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"), "3");
  EXPECT_EQ(R("{% set a, b = 1, 2 %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(R("{% set x %} body {{ 1 }} {% endset %}[{{ x }}]"), "[ body 1 ]");
  EXPECT_EQ(R("{% with a = 3 %}{{ a }}{% endwith %}[{{ a }}]"), "3[]");
  EXPECT_EQ(R("{% set d = dict(a=1) %}{{ d }} {{ namespace(d).a }}"), "{'a': 1} 1");
}

TEST(JinjaEngine, MacrosAndCallBlocks) {
  EXPECT_EQ(R("{% macro m(a, b='B') %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ m(1) }} {{ m(1, b=2) }} {{ m() }}"),
            "1B 12 B");
  EXPECT_EQ(R("{% macro m(a) %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }}"), "(2, 3){'k': 4}");
  EXPECT_EQ(R("{% macro m() %}{{ late }}{% endmacro %}{% set late = 'bound at call' %}{{ m() }}"), "bound at call");
  EXPECT_EQ(R("{% macro w(t) %}<{{ t }}>{{ caller(7) }}</{{ t }}>{% endmacro %}{% call(n) w('b') %}n={{ n }}"
              "{% endcall %}"),
            "<b>n=7</b>");
  EXPECT_EQ(R("{% filter upper %}abc{{ 'd' }}{% endfilter %}"), "ABCD");
  EXPECT_EQ(R("{% generation %}in {{ 1 }}{% set hidden = 1 %}{% endgeneration %}{{ hidden is defined }}"),
            "in 1False");
  EXPECT_NE(R("{% macro m() %}{% endmacro %}{{ m(1) }}").find("takes not more than 0 argument"), std::string::npos);
}

TEST(JinjaEngine, UndefinedSemantics) {
  EXPECT_EQ(R("[{{ missing }}]{{ missing is defined }}{{ missing | length }}{{ missing | default('d') }}"),
            "[]False0d");
  EXPECT_EQ(R("{{ d.nope }}|{{ d['nope'] is defined }}|{{ none.x }}|{{ 'x' in missing }}", {{"d", ordered_json::object()}}),
            "|False||False");
  // Using an undefined value where a real one is needed fails like jinja2's UndefinedError.
  EXPECT_NE(R("{{ missing.attr }}").find("'missing' is undefined"), std::string::npos);
  EXPECT_NE(R("{{ d.a.b }}", {{"d", ordered_json::object()}}).find("'dict object' has no attribute 'a'"),
            std::string::npos);
  EXPECT_NE(R("{{ 'x' + missing }}").find("'missing' is undefined"), std::string::npos);
}

TEST(JinjaEngine, Filters) {
  EXPECT_EQ(R("{{ '  a  ' | trim }}|{{ 'ab' | upper }}|{{ 'hello world' | title }}|{{ 'hI' | capitalize }}|"
              "{{ [3, 1, 2] | sort | join(',') }}|{{ [1, 2] | first }}{{ [1, 2] | last }}|{{ 'abc' | length }}"),
            "a|AB|Hello World|Hi|1,2,3|12|3");
  EXPECT_EQ(R("{{ 'a\nb' | indent(2) }}|{{ 'x-y' | replace('-', '+') }}|{{ '3' | int + 1 }}|{{ '2.5' | float }}|"
              "{{ 2.5 | round }}|{{ 3.14159 | round(2) }}|{{ [1, 1, 2] | unique | list }}|{{ [1, 2] | reverse | list }}"),
            "a\n  b|x+y|4|2.5|2.0|3.14|[1, 2]|[2, 1]");
  EXPECT_EQ(R("{{ xs | selectattr('on') | map(attribute='n') | join }}{{ xs | rejectattr('on') | list | length }}"
              "{{ xs | map(attribute='n') | sum }}{{ [1, 2, 3] | select('odd') | list }}",
              {{"xs", ordered_json::parse(R"([{"n": 1, "on": true}, {"n": 2, "on": false}])")}}),
            "113[1, 3]");
  EXPECT_EQ(R("{{ {'b': 1, 'a': 2} | dictsort }} {{ {'k': 'v'} | items | list }} {{ 'a' | string }}{{ none | string }}"),
            "[('a', 2), ('b', 1)] [('k', 'v')] aNone");
}

TEST(JinjaEngine, ToJsonIsHfJsonDumps) {
  EXPECT_EQ(R("{{ {'b': 1, 'a': [1.5, none, true, 'é\"'] } | tojson }}"), "{\"b\": 1, \"a\": [1.5, null, true, \"é\\\"\"]}");
  EXPECT_EQ(R("{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}"), "{\"a\": 2, \"b\": 1}");
  EXPECT_EQ(R("{{ {'a': [1]} | tojson(indent=2) }}"), "{\n  \"a\": [\n    1\n  ]\n}");
  EXPECT_EQ(R("{{ 'é😀' | tojson(ensure_ascii=true) }}"), "\"\\u00e9\\ud83d\\ude00\"");
  EXPECT_EQ(R("{{ [1, 2] | tojson(separators=(',', ':')) }}"), "[1,2]");
  EXPECT_NE(R("{{ missing | tojson }}").find("not JSON serializable"), std::string::npos);
}

TEST(JinjaEngine, TestsAndMethods) {
  EXPECT_EQ(R("{{ 1 is number }}{{ true is integer }}{{ 'x' is string }}{{ {} is mapping }}{{ none is none }}"
              "{{ 4 is divisibleby 2 }}{{ 3 is odd }}{{ 'a' is in 'abc' }}{{ x is not defined }}"),
            "TrueFalseTrueTrueTrueTrueTrueTrueTrue");
  EXPECT_EQ(R("{{ ' a b '.split() }} {{ 'a,b'.split(',') }} {{ 'xAx'.strip('x') }} {{ 'ab'.startswith('a') }} "
              "{{ {'k': 1}.get('z', 0) }} {{ 'abc'[::-1] }} {{ 'héllo'[1:3] }}"),
            "['a', 'b'] ['a', 'b'] A True 0 cba él");
  EXPECT_EQ(R("{{ 'ǆa'.title() }} {{ 'ǆ' | upper }} {{ 'Ǎǎ'.swapcase() }} {{ 'straße' | upper }} {{ 'ΟΔΟΣ' | lower }}"),
            "ǅa Ǆ ǎǍ STRASSE οδος");
  EXPECT_NE(R("{% set l = [1] %}{{ l.append(2) }}").find("unsafe"), std::string::npos);
}

TEST(JinjaEngine, StrftimeNowUsesInjectedClock) {
  auto tmpl = jinja::Template::Parse("{{ strftime_now('%Y-%m-%d %A %H:%M %Z%z') }}");
  ASSERT_TRUE(tmpl.ok());
  jinja::RenderOptions options;
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 2;
  tm.tm_mday = 14;
  tm.tm_hour = 9;
  tm.tm_min = 26;
  options.now = tm;
  auto out = tmpl->Render({}, options);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, "2026-03-14 Saturday 09:26 ");  // naive local time: %Z and %z are empty, as in Python
}

// ---- Errors -----------------------------------------------------------------------------------

TEST(JinjaErrors, SyntaxErrorsNameTheConstructAndPosition) {
  auto unknown = jinja::Template::Parse("line one\n  {% frobnicate %}");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("line 2, column 3"), std::string::npos) << unknown.status().message();
  EXPECT_NE(unknown.status().message().find("'frobnicate'"), std::string::npos);

  auto unclosed = jinja::Template::Parse("{% for x in y %}\n{{ x }}");
  ASSERT_FALSE(unclosed.ok());
  EXPECT_NE(unclosed.status().message().find("'for' block opened at line 1, column 1 is never closed"),
            std::string::npos)
      << unclosed.status().message();

  for (const char* bad : {"{{ 'unterminated }}", "{{ x ", "{{ (1 }}", "{# open", "{{ x | no_such_filter }}",
                          "{{ x is no_such_test }}", "{% break %}"}) {
    EXPECT_FALSE(jinja::Template::Parse(bad).ok()) << bad;
  }
}

TEST(JinjaErrors, UnsupportedConstructsAreReportedAsUnimplemented) {
  auto include = jinja::Template::Parse("ok\n{% include 'other.jinja' %}");
  ASSERT_FALSE(include.ok());
  EXPECT_EQ(include.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(include.status().message().find("line 2, column 1"), std::string::npos);
  EXPECT_NE(include.status().message().find("'{% include %}' is not supported"), std::string::npos);

  EXPECT_EQ(jinja::Template::Parse("{% extends 'base' %}").status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(jinja::Template::Parse("{% for x in y recursive %}{% endfor %}").status().code(),
            StatusCode::kUnimplemented);

  // A jinja2 filter ember lacks parses, and fails only when reached.
  auto wordwrap = jinja::Template::Parse("{% if false %}{{ x | wordwrap }}{% endif %}{{ 1 }}\n{{ 'a' | wordwrap }}");
  ASSERT_TRUE(wordwrap.ok());
  auto out = wordwrap->Render({});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(out.status().message().find("line 2"), std::string::npos) << out.status().message();
  EXPECT_NE(out.status().message().find("'wordwrap' filter"), std::string::npos);
}

TEST(JinjaErrors, RaiseExceptionMessageReachesTheCaller) {
  auto out = Render("{% if true %}\n  {{ raise_exception('Roles must alternate!') }}\n{% endif %}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("Roles must alternate!"), std::string::npos);
  EXPECT_NE(out.status().message().find("line 2, column 6"), std::string::npos) << out.status().message();
}

TEST(JinjaErrors, RuntimeTypeErrors) {
  EXPECT_NE(R("{{ 1 + 'a' }}").find("unsupported operand type(s) for +: 'int' and 'str'"), std::string::npos);
  EXPECT_NE(R("{{ 1 / 0 }}").find("division by zero"), std::string::npos);
  EXPECT_NE(R("{{ 1 < 'a' }}").find("'<' not supported between instances of 'int' and 'str'"), std::string::npos);
  EXPECT_NE(R("{% for x in 3 %}{% endfor %}").find("'int' object is not iterable"), std::string::npos);
  EXPECT_NE(R("{{ range(200000) | length }}").find("Range too big"), std::string::npos);
  EXPECT_NE(R("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("recursion"), std::string::npos);
}

TEST(JinjaErrors, DeepNestingIsRefusedNotACrash) {
  const std::string parens = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_NE(R(parens).find("nests too deeply"), std::string::npos);
  std::string ifs;
  for (int i = 0; i < 1000; ++i) ifs += "{% if true %}";
  EXPECT_NE(R(ifs).find("nests too deeply"), std::string::npos);
  EXPECT_NE(R("{{ " + std::string(5000, '-') + "1 }}").find("nests too deeply"), std::string::npos);
  // Values a template builds, and inputs, are bounded too.
  EXPECT_NE(R("{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}")
                .find("nests more than 256 containers"),
            std::string::npos);
  auto tmpl = ChatTemplate::Parse("{{ messages }}");
  ASSERT_TRUE(tmpl.ok());
  ChatTemplateInputs inputs;
  inputs.messages = ordered_json::parse("[{\"role\": \"user\", \"content\": " + std::string(100000, '[') +
                                        std::string(100000, ']') + "}]");
  EXPECT_FALSE(tmpl->Render(inputs).ok());
}

// Templates that jinja2 would run for ever (nested loops, `'' * 10**18`, exponential recursion)
// or that would build gigabytes (repetition, widths, shared lists printed) stop at a render limit
// with an error that names it; harmless edge cases still render.
TEST(JinjaErrors, RenderLimitsStopRunawayTemplates) {
  // Lower limits than the defaults, to keep the test fast (and small under ASan); the code paths
  // are the same.
  const auto limited = [](const std::string& source) -> std::string {
    auto tmpl = jinja::Template::Parse(source);
    if (!tmpl.ok()) return "ERROR: " + tmpl.status().ToString();
    jinja::RenderOptions options;
    options.limits.max_steps = 200000;
    options.limits.max_bytes = 4 << 20;
    auto out = tmpl->Render({}, options);
    return out.ok() ? *out : "ERROR: " + out.status().ToString();
  };
  const auto fails_with = [&limited](const std::string& source, const std::string& words) {
    const std::string out = limited(source);
    EXPECT_NE(out.find(words), std::string::npos) << source << " gave " << out.substr(0, 300);
  };
  // (Loops make lists and copy them, so here either limit may be reached first.)
  fails_with("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", "the limit of one render");
  fails_with("{% for a in [1, 2] * 1000 %}{% for b in [1, 2] * 1000 %}{% for c in [1] * 1000 %}{% endfor %}{% endfor %}{% endfor %}",
             "the limit of one render");
  fails_with("{% macro r(n) %}{% if n > 0 %}{{ r(n - 1) }}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(60) }}", "steps");
  fails_with("{{ 'x' * 100000000000 }}", "bytes");
  fails_with("{{ [1, 2] * 100000000000 }}", "bytes");
  fails_with("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "bytes");
  fails_with("{% set a = [1] * 1000 %}{% set b = [a] * 1000 %}{% set c = [b] * 1000 %}{{ c }}", "bytes");
  fails_with("{% set a = [1] * 1000 %}{% set b = [a] * 1000 %}{% set c = [b] * 1000 %}{{ c|tojson }}", "bytes");
  for (const char* wide : {"{{ 'x'|center(10000000000) }}", "{{ 'x'.ljust(10000000000) }}", "{{ 'x'.zfill(10000000000) }}",
                           "{{ 'a\nb'|indent(10000000000) }}", "{{ [1]|tojson(indent=10000000000) }}",
                           "{{ [1]|batch(10000000000, 0)|list }}", "{{ ('x' * 1000)|replace('', 'y' * 10000000) }}",
                           "{{ (['y' * 1000000] * 1000)|join('z' * 1000000) }}"}) {
    fails_with(wide, "bytes");
  }
  fails_with("{{ '%10000000000s' % 'x' }}", "too big");
  // Integer edge cases that were undefined behaviour in C++ (Python has big integers).
  fails_with("{{ -(-9223372036854775807 - 1) }}", "overflow");
  fails_with("{{ (-9223372036854775807 - 1) // -1 }}", "overflow");
  fails_with("{{ (-9223372036854775807 - 1) % -1 }}", "overflow");
  fails_with("{{ range(-9223372036854775807 - 1, 9223372036854775807)|length }}", "Range too big");
  EXPECT_EQ(limited("{{ range(9223372036854775806, 9223372036854775807, 5)|list }}"), "[9223372036854775806]");
  EXPECT_EQ(limited("{{ '%d|%d' % (1e20, -2.5) }}"), "100000000000000000000|-2");
  fails_with("{{ '%d' % (1e308 * 10) }}", "cannot convert float inf");
  fails_with("{{ '%1000d' % 1 }}", "too big");
  EXPECT_EQ(limited("{{ '' * 1000000000000000000 }}{{ ([] * 1000000000000000000)|length }}"), "0");
  EXPECT_EQ(limited("{{ 'abc'[1::9223372036854775807] }}{{ [1, 2, 3][-1::-9223372036854775807] }}"), "b[3]");
  EXPECT_EQ(limited("{{ '%5s|%-4d|%.2f|%05.1f' % ('x', 7, 3.14159, 2.25) }}"), "    x|7   |3.14|002.2");
  // The limits are per render and configurable.
  auto tmpl = ChatTemplate::Parse("{% for m in messages %}{{ m.content * 10 }}{% endfor %}");
  ASSERT_TRUE(tmpl.ok());
  ChatTemplateInputs inputs;
  inputs.messages = ordered_json::parse(R"([{"role": "user", "content": "0123456789"}])");
  EXPECT_EQ(tmpl->Render(inputs).value().size(), 100u);
  inputs.limits.max_bytes = 50;
  EXPECT_NE(tmpl->Render(inputs).status().message().find("more than 50 bytes"), std::string::npos);
  inputs.limits = {};
  inputs.limits.max_steps = 3;
  EXPECT_NE(tmpl->Render(inputs).status().message().find("more than 3 steps"), std::string::npos);
}

TEST(JinjaEngine, SelfReferentialNamespacesPrintLikePython) {
  EXPECT_EQ(R("{% set ns = namespace() %}{% set ns.self = ns %}{{ ns }}"), "<Namespace {'self': <Namespace {...}>}>");
  EXPECT_EQ(R("{% set ns = namespace(a=1) %}{% set ns.l = [ns, {'k': ns}] %}{{ ns }}"),
            "<Namespace {'a': 1, 'l': [<Namespace {...}>, {'k': <Namespace {...}>}]}>");
}

// ---- ChatTemplate input preparation -----------------------------------------------------------

TEST(ChatTemplate, PreparesMessagesLikeApplyChatTemplate) {
  auto tmpl = ChatTemplate::Parse(
      "{% for m in messages %}{{ m | tojson }}{{ m.content is defined }}\n{% endfor %}{{ bos_token }}{{ tools }}"
      "{{ documents }}{{ add_generation_prompt }}{{ flag }}");
  ASSERT_TRUE(tmpl.ok());
  ChatTemplateInputs inputs;
  inputs.messages = ordered_json::parse(
      R"([{"role": "assistant", "content": null, "reasoning_content": "r"},
          {"role": "assistant", "reasoning": "x", "thinking": "t", "content": "c"}])");
  inputs.bos_token = "<s>";
  inputs.extra = {{"flag", 7}, {"bos_token", "<override>"}};
  auto out = tmpl->Render(inputs);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // None-valued keys are dropped; thinking/reasoning_content are filled in from the first set field.
  EXPECT_EQ(*out,
            "{\"thinking\": \"r\", \"role\": \"assistant\", \"reasoning_content\": \"r\"}False\n"
            "{\"thinking\": \"t\", \"role\": \"assistant\", \"reasoning\": \"x\", \"content\": \"c\", "
            "\"reasoning_content\": \"t\"}True\n"
            "<override>NoneNoneFalse7");
}

TEST(ChatTemplate, RejectsMalformedInputs) {
  auto tmpl = ChatTemplate::Parse("{{ messages }}");
  ASSERT_TRUE(tmpl.ok());
  ChatTemplateInputs inputs;
  EXPECT_FALSE(tmpl->Render(inputs).ok());  // empty conversation, as apply_chat_template refuses
  inputs.messages = ordered_json::object();
  EXPECT_FALSE(tmpl->Render(inputs).ok());
  inputs.messages = ordered_json::array({"not an object"});
  EXPECT_FALSE(tmpl->Render(inputs).ok());
  inputs.messages = ordered_json::array({{{"role", "user"}, {"content", "hi"}}});
  inputs.tools = "not a list";
  EXPECT_FALSE(tmpl->Render(inputs).ok());
  inputs.tools = nullptr;
  inputs.extra = {{"messages", 1}};
  EXPECT_FALSE(tmpl->Render(inputs).ok());
}

TEST(ChatTemplate, SmolLM2TemplateFromGgufRenders) {
  auto tmpl = ChatTemplate::Parse(ReadFile(kTestData + "templates/smollm2.jinja"));
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();
  ChatTemplateInputs inputs;
  inputs.messages = ordered_json::array({{{"role", "user"}, {"content", "Hi"}}});
  inputs.add_generation_prompt = true;
  auto out = tmpl->Render(inputs);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

}  // namespace
}  // namespace ember
