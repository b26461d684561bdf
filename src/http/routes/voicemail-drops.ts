import { findDrop } from '../../messages/message-tables.ts';
import {
  CreateDropBody,
  createDrop,
  DROP_FILTERS,
  deleteDrop,
  searchDrops,
  toApiVoicemailDrop,
  UpdateDropBody,
  updateDrop,
  VoicemailDrop,
} from '../../voicemail/drops.ts';
import type { RoutePlugin } from '../fastify-types.ts';
import { messageRoutes } from '../message-routes.ts';

/** The specification's voicemail drop endpoints: search, create, read, update, delete, and the deliveries of one. */
export const voicemailDropRoutes: RoutePlugin = async (app, ctx) => {
  messageRoutes(app, ctx, {
    kind: 'voicemail_drop',
    path: 'voicemail_drops',
    noun: 'voicemail drop',
    tags: ['Voicemail drops'],
    schema: VoicemailDrop,
    createBody: CreateDropBody,
    updateBody: UpdateDropBody,
    filters: DROP_FILTERS,
    search: searchDrops,
    find: findDrop,
    create: createDrop,
    update: updateDrop,
    remove: deleteDrop,
    toApi: (view) => toApiVoicemailDrop(view, ctx.config.publicUrl),
  });
};
