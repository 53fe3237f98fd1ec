#include "volt/volt.hpp"

volt::Task<int> seven() {
  co_return 7;
}

int main() {
  volt::Runtime rt = volt::Runtime::Builder().worker_threads(1).build();
  return rt.block_on(seven()) == 7 ? 0 : 1;
}
