int ctest_dummy(void);
