//! The terminal while the inspector runs: raw mode and the alternate screen, given back on
//! every way out: a normal exit, an error (the guard's drop), and a panic (the hook, which
//! runs before the panic message is printed, so the message lands on a usable terminal).

use std::io::{Stdout, stdout};

use anyhow::{Context, Result};
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode};
use state_core::UnixMillis;

use super::App;

pub(crate) struct Terminal {
    inner: ratatui::Terminal<CrosstermBackend<Stdout>>,
}

fn restore() {
    let _ = disable_raw_mode();
    let _ = execute!(stdout(), LeaveAlternateScreen, ratatui::crossterm::cursor::Show);
}

impl Terminal {
    pub(crate) fn enter() -> Result<Terminal> {
        if !std::io::IsTerminal::is_terminal(&stdout()) {
            anyhow::bail!("the inspector needs a terminal: standard output is not one");
        }
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
        // The guard exists before the terminal changes, so a failure below still restores it.
        let terminal = Terminal { inner: ratatui::Terminal::new(CrosstermBackend::new(stdout()))? };
        enable_raw_mode().context("cannot put the terminal in raw mode")?;
        execute!(stdout(), EnterAlternateScreen).context("cannot switch to the alternate screen")?;
        Ok(terminal)
    }

    pub(crate) fn draw(&mut self, app: &mut App, now: UnixMillis) -> Result<()> {
        self.inner.draw(|frame| super::render::draw(frame, app, now))?;
        Ok(())
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        restore();
    }
}
