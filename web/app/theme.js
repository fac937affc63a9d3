// Applies the chosen theme before the first paint (a module script would run too late and flash).
document.documentElement.dataset.theme = localStorage.getItem('relay.theme') || 'system';
