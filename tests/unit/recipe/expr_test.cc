#include "recipe/expr.h"

#include <gtest/gtest.h>

namespace ember::recipe {
namespace {

Facts Sample() {
  return {{"vendor", Value::String("amd")},
          {"concurrency", Value::Number(48)},
          {"speculative", Value::Bool(true)},
          {"modalities", Value::List({"text", "image"})}};
}

Value Eval(const std::string& text) {
  auto e = Expr::Parse(text);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  auto v = e->Eval(Sample());
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return *v;
}

TEST(ExprTest, ComparisonsAndBooleans) {
  EXPECT_TRUE(Eval("vendor == 'amd' and concurrency >= 32").boolean);
  EXPECT_FALSE(Eval("vendor != 'amd' or concurrency < 32").boolean);
  EXPECT_TRUE(Eval("not (concurrency > 64) and speculative").boolean);
  // `and` binds tighter than `or`.
  EXPECT_TRUE(Eval("true or false and false").boolean);
}

TEST(ExprTest, MembershipAndLists) {
  EXPECT_TRUE(Eval("'image' in modalities").boolean);
  EXPECT_TRUE(Eval("'audio' not in modalities").boolean);
  EXPECT_TRUE(Eval("vendor in ['nvidia', 'amd']").boolean);
  EXPECT_EQ(Eval("['a', 'b']").ToString(), "['a', 'b']");
}

TEST(ExprTest, ArithmeticAndFunctions) {
  EXPECT_EQ(Eval("concurrency / 2 + 1").number, 25);
  EXPECT_EQ(Eval("min(concurrency, 8)").number, 8);
  EXPECT_EQ(Eval("max(concurrency, 8) * 2").number, 96);
  EXPECT_EQ(Eval("1_048_576").number, 1048576);
}

TEST(ExprTest, UnknownFactsAndTypeErrorsAreErrorsNotFalse) {
  auto e = Expr::Parse("vendr == 'amd'");
  ASSERT_TRUE(e.ok());
  auto v = e->EvalBool(Sample());
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("unknown fact 'vendr'"), std::string::npos);
  EXPECT_FALSE(Expr::Parse("vendor < 3")->Eval(Sample()).ok());
  EXPECT_FALSE(Expr::Parse("concurrency")->EvalBool(Sample()).ok());
  EXPECT_FALSE(Expr::Parse("concurrency / 0")->Eval(Sample()).ok());
}

TEST(ExprTest, ParseErrorsNameThePosition) {
  for (const char* bad : {"vendor ==", "(a", "'open", "a $ b", "f(1, 2)", "[1", "a b"}) {
    auto e = Expr::Parse(bad);
    EXPECT_FALSE(e.ok()) << bad;
  }
  auto e = Expr::Parse("vendor == ");
  EXPECT_NE(e.status().message().find("position"), std::string::npos);
}

TEST(ExprTest, IdentifiersAreCollected) {
  auto e = Expr::Parse("vendor == 'amd' and min(concurrency, tp) > 1 and 'x' in modalities");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->Identifiers(), (std::set<std::string>{"vendor", "concurrency", "tp", "modalities"}));
}

}  // namespace
}  // namespace ember::recipe
