// The dashboard's build (web/ → dist/web): hashed assets under /assets/, no inline scripts (the CSP of
// src/http/routes/panel.ts allows none), JSX through Oxc with Preact's automatic runtime.
import { defineConfig } from 'vite';

export default defineConfig({
  root: 'web',
  base: '/',
  publicDir: false,
  build: {
    outDir: '../dist/web',
    emptyOutDir: true,
    assetsDir: 'assets',
    target: 'es2022',
    // No module-preload polyfill: every browser the panel supports has module preloading.
    modulePreload: { polyfill: false },
    sourcemap: false,
  },
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  server: { proxy: { '/api': 'http://127.0.0.1:8080', '/schemas': 'http://127.0.0.1:8080' } },
});
