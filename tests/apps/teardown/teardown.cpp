// A C++ Vulkan application that uses its device the ways real engines do at their edges,
// for the test that kiln's trace layer never changes what an application does: it tears
// Vulkan down from a static object's destructor or from an atexit handler (after the C
// and Rust runtimes have begun to unwind their thread-local state), forks and uses Vulkan
// in the child, or allocates from many threads at once. It prints what it did and exits
// with a status of its own, so that a run with the layer and one without can be compared
// byte for byte.
//
// teardown static|atexit|fork|threads

#include <vulkan/vulkan.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

struct Gpu {
    VkInstance instance = VK_NULL_HANDLE;
    VkPhysicalDevice physical = VK_NULL_HANDLE;
    VkDevice device = VK_NULL_HANDLE;
    VkQueue queue = VK_NULL_HANDLE;
    uint32_t memory_type = 0;

    bool open() {
        VkApplicationInfo app{};
        app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
        app.pApplicationName = "kiln-teardown";
        app.apiVersion = VK_API_VERSION_1_1;
        VkInstanceCreateInfo ici{};
        ici.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
        ici.pApplicationInfo = &app;
        if (vkCreateInstance(&ici, nullptr, &instance) != VK_SUCCESS) return false;
        uint32_t n = 1;
        VkResult r = vkEnumeratePhysicalDevices(instance, &n, &physical);
        if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || n == 0) return false;
        VkPhysicalDeviceMemoryProperties props;
        vkGetPhysicalDeviceMemoryProperties(physical, &props);
        for (uint32_t i = 0; i < props.memoryTypeCount; i++) {
            if (props.memoryTypes[i].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) {
                memory_type = i;
                break;
            }
        }
        float priority = 1.0f;
        VkDeviceQueueCreateInfo qci{};
        qci.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
        qci.queueFamilyIndex = 0;
        qci.queueCount = 1;
        qci.pQueuePriorities = &priority;
        VkDeviceCreateInfo dci{};
        dci.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
        dci.queueCreateInfoCount = 1;
        dci.pQueueCreateInfos = &qci;
        if (vkCreateDevice(physical, &dci, nullptr, &device) != VK_SUCCESS) return false;
        vkGetDeviceQueue(device, 0, 0, &queue);
        return true;
    }

    VkDeviceMemory allocate(VkDeviceSize bytes) {
        VkMemoryAllocateInfo mai{};
        mai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
        mai.allocationSize = bytes;
        mai.memoryTypeIndex = memory_type;
        VkDeviceMemory memory = VK_NULL_HANDLE;
        if (vkAllocateMemory(device, &mai, nullptr, &memory) != VK_SUCCESS) return VK_NULL_HANDLE;
        return memory;
    }

    // What an engine's shutdown does: wait for the device, free what it holds, destroy.
    void close(std::vector<VkDeviceMemory>& held) {
        if (device == VK_NULL_HANDLE) return;
        VkResult waited = vkDeviceWaitIdle(device);
        VkResult queue_waited = vkQueueWaitIdle(queue);
        for (VkDeviceMemory m : held) vkFreeMemory(device, m, nullptr);
        held.clear();
        vkDestroyDevice(device, nullptr);
        vkDestroyInstance(instance, nullptr);
        device = VK_NULL_HANDLE;
        std::printf("closed: wait %d, queue wait %d\n", waited, queue_waited);
        std::fflush(stdout);
    }
};

Gpu gpu;
std::vector<VkDeviceMemory> held;

// A static object whose destructor tears the device down, as engines' singletons do.
struct Engine {
    bool armed = false;
    ~Engine() {
        if (armed) {
            std::printf("static destructor\n");
            gpu.close(held);
        }
    }
};
Engine engine;

void at_exit() {
    std::printf("atexit handler\n");
    gpu.close(held);
}

int fail(const char* what) {
    std::printf("failed: %s\n", what);
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "static";
    if (!gpu.open()) return fail("open");
    for (int i = 0; i < 4; i++) {
        VkDeviceMemory m = gpu.allocate(4u << 20);
        if (m == VK_NULL_HANDLE) return fail("allocate");
        held.push_back(m);
    }
    std::printf("opened, 4 allocations of 4 MiB\n");
    if (std::strcmp(mode, "static") == 0) {
        engine.armed = true;
        return 5;
    }
    if (std::strcmp(mode, "atexit") == 0) {
        std::atexit(at_exit);
        std::exit(6);
    }
    if (std::strcmp(mode, "fork") == 0) {
        std::fflush(stdout);
        pid_t child = fork();
        if (child == 0) {
            // The child opens its own device, as a worker process does.
            Gpu own;
            std::vector<VkDeviceMemory> mine;
            if (!own.open()) _exit(20);
            VkDeviceMemory m = own.allocate(2u << 20);
            if (m == VK_NULL_HANDLE) _exit(21);
            mine.push_back(m);
            own.close(mine);
            _exit(7);
        }
        int status = 0;
        waitpid(child, &status, 0);
        std::printf("child exited %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        gpu.close(held);
        return 8;
    }
    if (std::strcmp(mode, "threads") == 0) {
        std::atomic<int> failures{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < 8; t++) {
            threads.emplace_back([&failures] {
                for (int i = 0; i < 200; i++) {
                    VkDeviceMemory m = gpu.allocate(64u << 10);
                    if (m == VK_NULL_HANDLE) {
                        failures++;
                        continue;
                    }
                    vkFreeMemory(gpu.device, m, nullptr);
                }
                // A thread that ends while the device lives on: its thread-local state
                // goes, the device stays.
            });
        }
        for (auto& t : threads) t.join();
        std::printf("threads done, %d failures\n", failures.load());
        gpu.close(held);
        return 9;
    }
    return fail("mode");
}
