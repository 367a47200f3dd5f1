//! Windows' registry as kiln reads it: the values of a few keys under `HKEY_LOCAL_MACHINE`
//! (the OS's version, the BIOS and board, the display driver's timeout, the registered
//! Vulkan drivers, the display adapters' drivers), taken into plain data so that what they
//! mean is read, and tested, on any OS. Elsewhere than Windows the registry reads empty.

use std::collections::BTreeMap;

/// A registry value: text (`REG_SZ`, `REG_EXPAND_SZ`, `REG_MULTI_SZ` joined by `;`) or a
/// number (`REG_DWORD`, `REG_QWORD`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A string value.
    Text(String),
    /// A number value.
    Number(u64),
}

/// Keys under `HKEY_LOCAL_MACHINE` and their values, by key path and value name, both
/// compared without case as Windows does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Registry {
    keys: BTreeMap<String, BTreeMap<String, (String, Value)>>,
}

/// A key path as stored: lower case, `\` separated, no `HKEY_LOCAL_MACHINE\` prefix.
fn key_of(path: &str) -> String {
    let path = path.trim().trim_matches('\\');
    let path = ["HKEY_LOCAL_MACHINE\\", "HKLM\\"]
        .iter()
        .find_map(|p| {
            path.get(..p.len())
                .filter(|head| head.eq_ignore_ascii_case(p))
                .map(|_| &path[p.len()..])
        })
        .unwrap_or(path);
    path.to_ascii_lowercase()
}

impl Registry {
    /// Reads `keys` (paths under `HKEY_LOCAL_MACHINE`) and, to `depth` levels, the keys
    /// below them, from this machine's registry. Empty where there is none.
    pub fn read(keys: &[&str], depth: usize) -> Registry {
        let mut registry = Registry::default();
        for key in keys {
            os::read_tree(key, depth, &mut registry);
        }
        registry
    }

    /// Adds every key and value of `other`.
    pub fn merge(&mut self, other: Registry) {
        for (key, values) in other.keys {
            self.keys.entry(key).or_default().extend(values);
        }
    }

    /// Sets a value (the reader's, and a test's).
    pub fn set(&mut self, key: &str, name: &str, value: Value) {
        self.keys
            .entry(key_of(key))
            .or_default()
            .insert(name.to_ascii_lowercase(), (name.to_owned(), value));
    }

    /// Notes that a key exists, with or without values.
    pub fn add_key(&mut self, key: &str) {
        self.keys.entry(key_of(key)).or_default();
    }

    /// A value, by key and name.
    pub fn value(&self, key: &str, name: &str) -> Option<&Value> {
        self.keys
            .get(&key_of(key))?
            .get(&name.to_ascii_lowercase())
            .map(|(_, v)| v)
    }

    /// A text value, trimmed; None for an empty one.
    pub fn text(&self, key: &str, name: &str) -> Option<&str> {
        match self.value(key, name)? {
            Value::Text(t) => Some(t.trim()).filter(|t| !t.is_empty()),
            Value::Number(_) => None,
        }
    }

    /// A number value.
    pub fn number(&self, key: &str, name: &str) -> Option<u64> {
        match self.value(key, name)? {
            Value::Number(n) => Some(*n),
            Value::Text(_) => None,
        }
    }

    /// Every value of a key, with its name as written.
    pub fn values(&self, key: &str) -> Vec<(&str, &Value)> {
        self.keys
            .get(&key_of(key))
            .map(|v| {
                v.values()
                    .map(|(name, value)| (name.as_str(), value))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The names of the keys directly below `key` (`0000`, `0001`, ...), lower case.
    pub fn subkeys(&self, key: &str) -> Vec<String> {
        let prefix = format!("{}\\", key_of(key));
        let mut out: Vec<String> = self
            .keys
            .keys()
            .filter_map(|k| k.strip_prefix(&prefix))
            .map(|rest| rest.split('\\').next().unwrap_or(rest).to_owned())
            .collect();
        out.dedup();
        out
    }

    /// Reads a registry export in regedit's `.reg` format (`[HKEY_LOCAL_MACHINE\...]`,
    /// `"Name"="text"`, `"Name"=dword:0000000a`, `@` for the default value): how the
    /// tests lay out a machine's registry.
    pub fn from_export(text: &str) -> Registry {
        let mut registry = Registry::default();
        let mut key: Option<String> = None;
        for line in text.lines().map(str::trim) {
            if let Some(path) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                registry.add_key(path);
                key = Some(path.to_owned());
                continue;
            }
            let Some(key) = &key else { continue };
            let Some((name, value)) = line.split_once('=') else {
                continue;
            };
            let name = if name == "@" {
                String::new()
            } else {
                unquote(name)
            };
            let value = if let Some(hex) = value.strip_prefix("dword:") {
                u64::from_str_radix(hex.trim(), 16).ok().map(Value::Number)
            } else if let Some(hex) = value.strip_prefix("qword:") {
                u64::from_str_radix(hex.trim(), 16).ok().map(Value::Number)
            } else {
                Some(Value::Text(unquote(value)))
            };
            if let Some(value) = value {
                registry.set(key, &name, value);
            }
        }
        registry
    }
}

/// A `.reg` string without its quotes and escapes (`\\` is `\`, `\"` is `"`).
fn unquote(text: &str) -> String {
    let inner = text
        .trim()
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(text.trim());
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            out.extend(chars.next());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(not(windows))]
mod os {
    pub fn read_tree(_key: &str, _depth: usize, _into: &mut super::Registry) {}
}

#[cfg(windows)]
mod os {
    use windows::Win32::Foundation::ERROR_SUCCESS;
    use windows::Win32::System::Registry::{
        HKEY, HKEY_LOCAL_MACHINE, KEY_READ, KEY_WOW64_64KEY, REG_DWORD, REG_EXPAND_SZ,
        REG_MULTI_SZ, REG_QWORD, REG_SZ, RegCloseKey, RegEnumKeyExW, RegEnumValueW, RegOpenKeyExW,
    };
    use windows::core::{HSTRING, PWSTR};

    use super::{Registry, Value};

    /// A value's bytes as kiln's [`Value`].
    fn value_of(kind: u32, bytes: &[u8]) -> Option<Value> {
        let wide = || -> String {
            let units: Vec<u16> = bytes
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect();
            String::from_utf16_lossy(&units)
        };
        match kind {
            k if k == REG_SZ.0 || k == REG_EXPAND_SZ.0 => {
                Some(Value::Text(wide().trim_end_matches('\0').to_owned()))
            }
            k if k == REG_MULTI_SZ.0 => Some(Value::Text(
                wide()
                    .split('\0')
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
                    .join(";"),
            )),
            k if k == REG_DWORD.0 => bytes
                .get(..4)
                .map(|b| Value::Number(u32::from_le_bytes([b[0], b[1], b[2], b[3]]).into())),
            k if k == REG_QWORD.0 => bytes.get(..8).map(|b| {
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                Value::Number(u64::from_le_bytes(a))
            }),
            _ => None,
        }
    }

    pub fn read_tree(key: &str, depth: usize, into: &mut Registry) {
        let mut handle = HKEY::default();
        // SAFETY: a NUL-terminated path and a valid out-pointer; the key is closed below.
        let opened = unsafe {
            RegOpenKeyExW(
                HKEY_LOCAL_MACHINE,
                &HSTRING::from(key),
                None,
                KEY_READ | KEY_WOW64_64KEY,
                &mut handle,
            )
        };
        if opened != ERROR_SUCCESS {
            return;
        }
        into.add_key(key);
        let mut name = vec![0u16; 16_384];
        let mut data = vec![0u8; 65_536];
        for index in 0.. {
            let mut name_len = name.len() as u32;
            let mut data_len = data.len() as u32;
            let mut kind = 0u32;
            // SAFETY: buffers of the lengths given, valid out-pointers.
            let read = unsafe {
                RegEnumValueW(
                    handle,
                    index,
                    Some(PWSTR(name.as_mut_ptr())),
                    &mut name_len,
                    None,
                    Some(&mut kind),
                    Some(data.as_mut_ptr()),
                    Some(&mut data_len),
                )
            };
            if read != ERROR_SUCCESS {
                break;
            }
            let value_name = String::from_utf16_lossy(&name[..name_len as usize]);
            if let Some(value) = value_of(kind, &data[..data_len as usize]) {
                into.set(key, &value_name, value);
            }
        }
        if depth > 0 {
            let mut children = Vec::new();
            for index in 0.. {
                let mut name_len = name.len() as u32;
                // SAFETY: a name buffer of the length given and a valid out-pointer.
                let read = unsafe {
                    RegEnumKeyExW(
                        handle,
                        index,
                        Some(PWSTR(name.as_mut_ptr())),
                        &mut name_len,
                        None,
                        None,
                        None,
                        None,
                    )
                };
                if read != ERROR_SUCCESS {
                    break;
                }
                children.push(String::from_utf16_lossy(&name[..name_len as usize]));
            }
            for child in children {
                read_tree(&format!("{key}\\{child}"), depth - 1, into);
            }
        }
        // SAFETY: the key opened above, closed once.
        let _ = unsafe { RegCloseKey(handle) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_export_reads_as_the_registry_it_describes() {
        let r = Registry::from_export(
            "Windows Registry Editor Version 5.00\r\n\r\n\
             [HKEY_LOCAL_MACHINE\\SYSTEM\\CurrentControlSet\\Control\\GraphicsDrivers]\r\n\
             \"TdrDelay\"=dword:0000000a\r\n\
             @=\"default\"\r\n\r\n\
             [HKEY_LOCAL_MACHINE\\SOFTWARE\\Khronos\\Vulkan\\Drivers]\r\n\
             \"C:\\\\Windows\\\\System32\\\\DriverStore\\\\nv-vk64.json\"=dword:00000000\r\n\
             [HKEY_LOCAL_MACHINE\\SYSTEM\\Class\\0000]\r\n\
             \"DriverDesc\"=\"NVIDIA \\\"GeForce\\\" RTX 4090\"\r\n\
             [HKEY_LOCAL_MACHINE\\SYSTEM\\Class\\0001\\Settings]\r\n",
        );
        let gd = r"HKLM\SYSTEM\CurrentControlSet\Control\GraphicsDrivers";
        assert_eq!(r.number(gd, "tdrdelay"), Some(10));
        assert_eq!(r.text(gd, ""), Some("default"));
        assert_eq!(r.text(gd, "TdrDelay"), None, "a number is not text");
        let drivers = r.values(r"SOFTWARE\Khronos\Vulkan\Drivers");
        assert_eq!(
            drivers,
            [(
                r"C:\Windows\System32\DriverStore\nv-vk64.json",
                &Value::Number(0)
            )]
        );
        assert_eq!(
            r.text(r"SYSTEM\Class\0000", "DriverDesc"),
            Some("NVIDIA \"GeForce\" RTX 4090")
        );
        assert_eq!(r.subkeys(r"SYSTEM\Class"), ["0000", "0001"]);
        assert_eq!(r.value(r"SYSTEM\Nowhere", "x"), None);
    }
}
