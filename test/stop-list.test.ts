import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { StopList } from '../src/commands/stop-list.js';

describe('StopList: what startInjector has started', () => {
  it('stops the latest first, once', async () => {
    const stopped: string[] = [];
    const list = new StopList();
    for (const part of ['tls', 'versions', 'watches']) list.add(() => void stopped.push(part));
    list.add(async () => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      stopped.push('server');
    });
    await list.stopAll();
    await list.stopAll();
    assert.deepEqual(stopped, ['server', 'watches', 'versions', 'tls']);
  });

  it('stops the rest when one stop fails, then throws that failure', async () => {
    const stopped: string[] = [];
    const list = new StopList();
    list.add(() => void stopped.push('first'));
    list.add(() => {
      throw new Error('drain failed');
    });
    list.add(() => void stopped.push('last'));
    await assert.rejects(list.stopAll(), /drain failed/);
    assert.deepEqual(stopped, ['last', 'first']);
  });
});
