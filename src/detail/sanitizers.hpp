// sanitizers.hpp: VOLT_TSAN is defined when this translation unit is built
// with ThreadSanitizer (GCC names it __SANITIZE_THREAD__, clang a feature).
//
// The few places that behave differently under TSan say why next to the
// difference: TSan does not model fences (store_load_barrier.hpp), and it runs
// an asynchronous signal's handler only inside, or on leaving, a call it
// intercepts, which epoll_pwait2 and a raw futex wait are not (io/driver.cpp,
// futex.cpp).
#pragma once

#if defined(__SANITIZE_THREAD__)
#define VOLT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define VOLT_TSAN 1
#endif
#endif
