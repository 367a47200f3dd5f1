/* A stand-in for Windows' bcryptprimitives.dll, for running kiln.exe under a Wine that
 * lacks it (Debian bookworm's Wine 8.0): Rust's standard library imports ProcessPrng from
 * it, which Windows 10 and later have. It fills the buffer from RtlGenRandom
 * (advapi32's SystemFunction036), which every Wine has. Test support only: never shipped. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    while (length > 0) {
        ULONG chunk = length > 0x10000000 ? 0x10000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
