#include "ctest_support.h"
int ctest_dummy(void) { return 0; }
