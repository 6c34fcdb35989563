// FunctionRef: a non-owning reference to a callable, for parameters that are called during the
// call and never stored beyond it (ThreadPool::ParallelFor's loop body). Unlike std::function it
// never allocates: a lambda whose captures exceed std::function's small buffer (16 bytes in
// libstdc++) made one heap allocation per ParallelFor, hundreds per decode step.
#pragma once

#include <type_traits>
#include <utility>

namespace ember {

template <typename Signature>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  // `f` must outlive every call through this reference (a temporary lambda passed as an argument
  // lives until the full expression ends, which is what parameters need).
  template <typename F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> && std::is_invocable_r_v<R, F&, Args...>)
  FunctionRef(F&& f) noexcept  // NOLINT(google-explicit-constructor): converts like std::function
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* object, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(object))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

}  // namespace ember
