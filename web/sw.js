self.addEventListener("install", () => {});
