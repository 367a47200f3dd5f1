// A C++ Vulkan application that opens its driver itself, as some engines do when
// VK_DRIVER_FILES names one: it reads the driver's manifest, loads the library it names and
// asks it for its functions, past the Vulkan loader (and so past any layer). It allocates
// device memory for a while and frees it, for the test that kiln says why its trace saw
// nothing rather than calling it "not a Vulkan application".
//
// direct_icd SECONDS

#include <vulkan/vulkan.h>

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

typedef PFN_vkVoidFunction (*IcdGetInstanceProcAddr)(VkInstance, const char*);

int main(int argc, char** argv) {
    int seconds = argc > 1 ? std::atoi(argv[1]) : 2;
    const char* files = std::getenv("VK_DRIVER_FILES");
    if (!files) files = std::getenv("VK_ICD_FILENAMES");
    if (!files) {
        std::printf("no VK_DRIVER_FILES\n");
        return 2;
    }
    std::ifstream in(files);
    std::stringstream text;
    text << in.rdbuf();
    std::string manifest = text.str();
    size_t at = manifest.find("\"library_path\"");
    size_t open = manifest.find('"', manifest.find(':', at) + 1);
    size_t close = manifest.find('"', open + 1);
    if (at == std::string::npos || open == std::string::npos || close == std::string::npos) {
        std::printf("no library_path in %s\n", files);
        return 2;
    }
    std::string library = manifest.substr(open + 1, close - open - 1);
    void* driver = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!driver) {
        std::printf("cannot load %s\n", library.c_str());
        return 2;
    }
    auto gipa = reinterpret_cast<IcdGetInstanceProcAddr>(dlsym(driver, "vk_icdGetInstanceProcAddr"));
    if (!gipa) return 2;
    auto create_instance = reinterpret_cast<PFN_vkCreateInstance>(gipa(VK_NULL_HANDLE, "vkCreateInstance"));
    VkApplicationInfo app{};
    app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
    app.apiVersion = VK_API_VERSION_1_1;
    VkInstanceCreateInfo ici{};
    ici.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
    ici.pApplicationInfo = &app;
    VkInstance instance;
    if (!create_instance || create_instance(&ici, nullptr, &instance) != VK_SUCCESS) return 3;
#define LOAD(name) auto name = reinterpret_cast<PFN_##name>(gipa(instance, #name))
    LOAD(vkEnumeratePhysicalDevices);
    LOAD(vkCreateDevice);
    LOAD(vkGetDeviceProcAddr);
    VkPhysicalDevice physical;
    uint32_t n = 1;
    vkEnumeratePhysicalDevices(instance, &n, &physical);
    float priority = 1.0f;
    VkDeviceQueueCreateInfo qci{};
    qci.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
    qci.queueCount = 1;
    qci.pQueuePriorities = &priority;
    VkDeviceCreateInfo dci{};
    dci.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &qci;
    VkDevice device;
    if (vkCreateDevice(physical, &dci, nullptr, &device) != VK_SUCCESS) return 4;
    auto allocate = reinterpret_cast<PFN_vkAllocateMemory>(vkGetDeviceProcAddr(device, "vkAllocateMemory"));
    auto release = reinterpret_cast<PFN_vkFreeMemory>(vkGetDeviceProcAddr(device, "vkFreeMemory"));
    VkMemoryAllocateInfo mai{};
    mai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
    mai.allocationSize = 16u << 20;
    VkDeviceMemory memory;
    if (allocate(device, &mai, nullptr, &memory) != VK_SUCCESS) return 5;
    std::printf("driver %s opened directly, 16 MiB allocated\n", library.c_str());
    std::fflush(stdout);
    sleep(seconds);
    release(device, memory, nullptr);
    return 0;
}
