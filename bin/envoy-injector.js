#!/usr/bin/env node
// The built CLI: the bundle `npm run build` makes from src/main.ts (`npm ci`/`npm install` build it through the prepare script).
import '../dist/bundle/main.js';
