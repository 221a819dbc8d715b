#include <gtest/gtest.h>
#include <cuda.h>
TEST(Smoke, Works) { EXPECT_EQ(CUDA_SUCCESS, 0); }
