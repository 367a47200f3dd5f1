//! The console kiln was started in. On Windows, a program double-clicked in Explorer gets
//! a console window of its own, which closes the moment the program ends: kiln then runs
//! its quick check and keeps the window open for the verdict to be read. Linux has no such
//! start: a terminal outlives the program.

/// True when kiln's console was made for kiln alone (double-clicked in Explorer), not a
/// terminal a person typed the command in.
pub fn opened_for_kiln() -> bool {
    os::opened_for_kiln()
}

/// The columns of the terminal kiln's progress is drawn on (standard error), where it is
/// one: a live line wider than this wraps and breaks the bar.
pub fn columns() -> Option<usize> {
    console::Term::stderr()
        .size_checked()
        .map(|(_, columns)| usize::from(columns))
}

#[cfg(not(windows))]
mod os {
    pub fn opened_for_kiln() -> bool {
        false
    }
}

#[cfg(windows)]
mod os {
    use windows::Win32::System::Console::GetConsoleProcessList;

    pub fn opened_for_kiln() -> bool {
        let mut processes = [0u32; 4];
        // SAFETY: a writable array of the length the call is given.
        let attached = unsafe { GetConsoleProcessList(&mut processes) };
        // A typed command shares its console with the shell; a double-click's is kiln's.
        attached == 1
    }
}
