# The DDP communication hooks (engine/ddp/comm_hook.cpp, powersgd.cpp). comm_hooks_worker is one
# rank; test_comm_hooks launches it for 1 to 4 ranks through `dpscope launch` and compares PowerSGD
# with PyTorch's own powerSGD_hook (powersgd_oracle.py under /usr/bin/torchrun, when available).
add_executable(comm_hooks_worker ${CMAKE_CURRENT_LIST_DIR}/comm_hooks_worker.cpp)
target_include_directories(comm_hooks_worker PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(comm_hooks_worker PRIVATE dpscope_engine)
dpscope_test(test_comm_hooks ${CMAKE_CURRENT_LIST_DIR}/test_comm_hooks.cpp)
target_link_libraries(test_comm_hooks PRIVATE dpscope_engine)
add_dependencies(test_comm_hooks dpscope comm_hooks_worker)
